package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// tokenCmd manages the read-only tokens of crewd's HTTP API. They live in <data>/readonly.tokens as digests
// only, so these commands edit that file directly: crewd need not run, and a running crewd picks a change up
// within a second (it looks at the file at most once a second: a token revoked just after a look is still taken
// until the next).
func (a *app) tokenCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke read-only tokens for the dashboard's HTTP API",
	}
	var (
		readOnly bool
		name     string
	)
	create := &cobra.Command{
		Use:   "create --read-only [--name NAME]",
		Short: "Create a read-only token (printed once; crewd keeps only its digest)",
		Args:  args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !readOnly {
				return usagef("only read-only tokens can be created (--read-only); the admin token is <data>/%s", adminTokenFile)
			}
			if err := a.needData(); err != nil {
				return err
			}
			tok, rec, err := daemon.CreateReadOnlyToken(a.dataDir, name, time.Now())
			if err != nil {
				return openErr(fmt.Errorf("crewctl: %w", err))
			}
			if a.json {
				made := map[string]any{"id": rec.ID, "name": rec.Name, "created": rec.Created, "token": tok}
				if err := a.printJSON(made); err != nil {
					return a.revokeUnshown(rec.ID, err)
				}
				return nil
			}
			if err := a.stdout().printf("%s\n", tok); err != nil {
				return a.revokeUnshown(rec.ID, err)
			}
			screen{a.io.err}.printf("read-only token %s created; it is shown only now (use it as Authorization: "+
				"Bearer TOKEN)\n", rec.ID)
			return nil
		},
	}
	create.Flags().BoolVar(&readOnly, "read-only", false, "the token may read the HTTP API and nothing else (required)")
	create.Flags().StringVar(&name, "name", "", "a note saying who or what uses it")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the read-only tokens (ids, names, creation times; never the tokens)",
		Args:  args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.needData(); err != nil {
				return err
			}
			ts, err := daemon.ListReadOnlyTokens(a.dataDir)
			if err != nil {
				return openErr(fmt.Errorf("crewctl: %w", err))
			}
			if a.json {
				if ts == nil {
					ts = []daemon.ReadOnlyToken{}
				}
				return a.printJSON(map[string]any{"tokens": ts})
			}
			for _, t := range ts {
				a.stdout().printf("%s  %s  %s\n", t.ID, t.Created.Format(time.RFC3339), t.Name)
			}
			return nil
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a read-only token (crewd refuses it within a second)",
		Args:  args(1, "a token id (crewctl token list shows them)"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := a.needData(); err != nil {
				return err
			}
			ok, err := daemon.RevokeReadOnlyToken(a.dataDir, argv[0])
			if err != nil {
				return openErr(fmt.Errorf("crewctl: %w", err))
			}
			if !ok {
				return problemf("no read-only token %q", argv[0])
			}
			if a.json {
				return a.printJSON(map[string]any{"id": argv[0], "revoked": true})
			}
			a.stdout().printf("read-only token %s revoked\n", argv[0])
			return nil
		},
	}
	c.AddCommand(create, list, revoke)
	return c
}

// revokeUnshown revokes the read-only token id just created, whose printing failed with err (stdout on a full disk):
// a token is shown only once, so no one holds this one, and it would stay valid, listed under its name, beside the
// one created again.
func (a *app) revokeUnshown(id string, err error) error {
	if _, rerr := daemon.RevokeReadOnlyToken(a.dataDir, id); rerr != nil {
		return problemf("token create: the token was not shown (%v), and revoking it failed (%v): revoke %s", err, rerr, id)
	}
	return problemf("token create: the token was not shown (%v); it was revoked, so create another", err)
}

// needData refuses a token command without a data directory: the token file lives there, and an empty path would
// read or write a file in the current directory instead.
func (a *app) needData() error {
	if a.dataDir == "" {
		return usagef("no data directory: pass --data")
	}
	return nil
}

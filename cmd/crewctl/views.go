package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/projections"
)

// The live views ask crewd with the admin token. Each prints a table by
// default and the broker's answer, decoded and re-encoded, with --json.

// view connects, runs fn and closes.
func (a *app) view(ctx context.Context, fn func(b Broker) error) error {
	b, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	return fn(b)
}

func millis(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

type runsPage struct {
	Runs       []broker.WireRun `json:"runs"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

func (a *app) runsCmd() *cobra.Command {
	var status, cursor string
	var limit int
	var newest bool
	c := &cobra.Command{
		Use:   "runs",
		Short: "List runs (query.runs)",
		Long: `runs lists a page of runs (query.runs), oldest first or with --newest newest first, and when more
follow names the command for the next page ("more: crewctl runs ... --cursor C"). A cursor is a place in
the order runs were created, not in the listing: with --json, pass nextCursor as --cursor with the same
--status and --newest.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 || limit > maxPageLimit {
				return usagef("runs: --limit %d is outside 0..%d (0: the daemon's default)", limit, maxPageLimit)
			}
			p := map[string]any{}
			if status != "" {
				p["status"] = strings.Split(status, ",")
			}
			if limit > 0 {
				p["limit"] = limit
			}
			if cursor != "" {
				p["cursor"] = cursor
			}
			if newest {
				p["newest"] = true
			}
			return a.view(cmd.Context(), func(b Broker) error {
				var page runsPage
				if err := call(cmd.Context(), b, "query.runs", p, &page); err != nil {
					return err
				}
				if page.Runs == nil {
					page.Runs = []broker.WireRun{}
				}
				if a.json {
					return a.printJSON(page)
				}
				tw := a.stdout().table()
				tw.printf("RUN\tSTATUS\tTEAM\tBUDGET USED\tUPDATED\tGOAL\n")
				for _, r := range page.Runs {
					tw.printf("%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Status, orOmitted(r.NamesOmitted, r.Team), budgetOf(r.Run),
						millis(r.UpdatedAt), orOmitted(r.TextsOmitted, r.Goal))
				}
				tw.flush()
				if page.NextCursor != "" {
					// NB: the cursor is a place in creation order, not this listing: the next page is the listing's
					// only with the same filter, order and size.
					a.stdout().printf("more: crewctl runs%s --cursor %s\n", listingFlags(status, newest, limit), page.NextCursor)
				}
				return nil
			})
		},
	}
	c.Flags().StringVar(&status, "status", "", "only runs in these statuses (comma-separated)")
	c.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("page size, 0..%d (0: the daemon's default)", maxPageLimit))
	c.Flags().StringVar(&cursor, "cursor", "",
		"continue after a previous page (its nextCursor), with its --status and --newest")
	c.Flags().BoolVar(&newest, "newest", false, "newest first")
	return c
}

// listingFlags are the flags of runs that shape its listing, as the command line gives them, for the command that
// prints the next page.
func listingFlags(status string, newest bool, limit int) string {
	var flags string
	if status != "" {
		flags += " --status " + status
	}
	if newest {
		flags += " --newest"
	}
	if limit > 0 {
		flags += " --limit " + strconv.Itoa(limit)
	}
	return flags
}

func budgetOf(r projections.Run) string {
	switch {
	case r.BudgetUnlimited:
		return fmt.Sprintf("%d/unlimited", r.BudgetUsed)
	case r.BudgetTotal != nil:
		return fmt.Sprintf("%d/%d", r.BudgetUsed, *r.BudgetTotal)
	}
	return fmt.Sprintf("%d/-", r.BudgetUsed)
}

// runViews is one run's views from the daemon.
type runViews struct {
	Run         broker.WireRun          `json:"run"`
	Tasks       []broker.WireTask       `json:"tasks"`
	Delegations []broker.WireDelegation `json:"delegations"`
	Ledger      []projections.Account   `json:"ledger"`
	// dependsOnRead are the tasks whose dependsOn crewd left out and crewctl read page by page.
	dependsOnRead map[string]bool
}

func (a *app) fetch(ctx context.Context, b Broker, runID string, only ...string) (runViews, error) {
	rv, err := fetchRun(ctx, b, runID, only...)
	rv.Tasks, rv.Delegations, rv.Ledger = nonNil(rv.Tasks), nonNil(rv.Delegations), nonNil(rv.Ledger)
	return rv, err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *app) showCmd() *cobra.Command {
	show := &cobra.Command{Use: "show", Short: "Show one object in detail"}
	show.AddCommand(&cobra.Command{
		Use:   "run ID",
		Short: "A run's task tree: depth, status, role and each parent's budget use",
		Args:  args(1, "a run id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.view(cmd.Context(), func(b Broker) error {
				rv, err := a.fetch(cmd.Context(), b, argv[0])
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(rv)
				}
				printTree(a.stdout(), rv)
				return nil
			})
		},
	})
	show.AddCommand(a.showJobCmd())
	return show
}

// printTree prints the run and every one of its tasks once, each delegation's shadow task under its parent.
func printTree(w screen, rv runViews) {
	r := rv.Run
	w.printf("run %s  %s  team %s  budget %s\n  goal: %s\n", r.RunID, r.Status, orOmitted(r.NamesOmitted, r.Team),
		budgetOf(r.Run), orOmitted(r.TextsOmitted, r.Goal))
	parentOf := map[string]string{}
	for _, d := range rv.Delegations {
		parentOf[d.SubID] = d.ParentTaskID
	}
	inRun := make(map[string]bool, len(rv.Tasks))
	for _, t := range rv.Tasks {
		inRun[t.TaskID] = true
	}
	children := map[string][]broker.WireTask{}
	var roots []broker.WireTask
	for _, t := range rv.Tasks {
		// NB: a delegation may name a parent the run does not hold (an import records what its source wrote).
		if p, ok := parentOf[t.TaskID]; ok && inRun[p] {
			children[p] = append(children[p], t)
		} else {
			roots = append(roots, t)
		}
	}
	reached := make(map[string]bool, len(rv.Tasks))
	var reach func(id string)
	reach = func(id string) {
		reached[id] = true
		for _, c := range children[id] {
			reach(c.TaskID)
		}
	}
	for _, t := range roots {
		reach(t.TaskID)
	}
	for _, t := range rv.Tasks {
		if reached[t.TaskID] {
			continue
		}
		// Delegations that name each other as parents (an import can record them) reach no root: the cycle is cut
		// at its first task, which is printed as a root.
		p := parentOf[t.TaskID]
		children[p] = slices.DeleteFunc(children[p], func(c broker.WireTask) bool { return c.TaskID == t.TaskID })
		roots = append(roots, t)
		reach(t.TaskID)
	}
	var walk func(ts []broker.WireTask, prefix string)
	walk = func(ts []broker.WireTask, prefix string) {
		for i, t := range ts {
			branch, next := "├─ ", "│  "
			if i == len(ts)-1 {
				branch, next = "└─ ", "   "
			}
			line := fmt.Sprintf("%s%s%s  %s  %s  depth %d", prefix, branch, t.TaskID, orOmitted(t.NamesOmitted, t.Role),
				t.Status, t.EffectiveDepth())
			if t.Allocation != nil {
				line += fmt.Sprintf("  budget %d/%d spent", t.Allocation.TokensSpent, t.Allocation.TokensGranted)
			}
			if n := len(children[t.TaskID]); n > 0 {
				line += fmt.Sprintf("  %d delegation(s)", n)
			}
			if p, ok := parentOf[t.TaskID]; ok && prefix == "" {
				line += fmt.Sprintf("  delegated by %s", p)
			}
			w.printf("%s\n", line)
			walk(children[t.TaskID], prefix+next)
		}
	}
	walk(roots, "")
}

// runScoped is a one-table view of a run, answered by one query.
func (a *app) runScoped(use, short, query string, print func(w screen, rv runViews) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " RUN",
		Short: short,
		Args:  args(1, "a run id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.view(cmd.Context(), func(b Broker) error {
				rv, err := a.fetch(cmd.Context(), b, argv[0], query)
				if err != nil {
					return err
				}
				return print(a.stdout(), rv)
			})
		},
	}
}

func (a *app) tasksCmd() *cobra.Command {
	return a.runScoped("tasks", "A run's tasks, shadow tasks included (query.tasks)", "query.tasks", func(w screen, rv runViews) error {
		if a.json {
			return a.printJSON(map[string]any{"tasks": rv.Tasks})
		}
		tw := w.table()
		tw.printf("TASK\tROLE\tSTATUS\tDEPTH\tALLOCATION\tUSAGE\tTITLE\n")
		for _, t := range rv.Tasks {
			alloc := "-"
			if t.Allocation != nil {
				alloc = fmt.Sprintf("%d/%d", t.Allocation.TokensSpent, t.Allocation.TokensGranted)
			}
			tw.printf("%s\t%s\t%s\t%d\t%s\t%d\t%s\n", t.TaskID, orOmitted(t.NamesOmitted, t.Role), t.Status,
				t.EffectiveDepth(), alloc, t.Usage.Budgeted(), orOmitted(t.TextsOmitted, t.Title))
		}
		return tw.flush()
	})
}

func (a *app) delegationsCmd() *cobra.Command {
	return a.runScoped("delegations", "A run's delegations (query.delegations)", "query.delegations", func(w screen, rv runViews) error {
		if a.json {
			return a.printJSON(map[string]any{"delegations": rv.Delegations})
		}
		tw := w.table()
		tw.printf("SUB\tPARENT\tROLE\tSTATUS\tDEPTH\tMETERED\tRESERVED\tUSED\tADMITTED\tDEADLINE\n")
		for _, d := range rv.Delegations {
			tw.printf("%s\t%s\t%s\t%s\t%d\t%t\t%d\t%d\t%s\t%s\n", d.SubID, d.ParentTaskID, orOmitted(d.NamesOmitted, d.Role),
				d.Status, d.Depth, d.Metered, d.Reserved, d.UsageTokens, millis(d.AdmittedAt), millis(d.Deadline))
		}
		return tw.flush()
	})
}

func (a *app) ledgerCmd() *cobra.Command {
	return a.runScoped("ledger", "A run's budget ledger per parent task (query.ledger)", "query.ledger", func(w screen, rv runViews) error {
		if a.json {
			return a.printJSON(map[string]any{"accounts": rv.Ledger})
		}
		tw := w.table()
		tw.printf("TASK\tGRANTED\tSPENT\tRESERVED\tCHARGED\tREMAINING\n")
		for _, ac := range rv.Ledger {
			tw.printf("%s\t%d\t%d\t%d\t%d\t%d\n", ac.TaskID, ac.TokensGranted, ac.TokensSpent, ac.Reserved, ac.Charged,
				ac.Remaining())
			for _, r := range ac.Reservations {
				tw.printf("  reserve\t\t%d\t\t\t%s %s\n", r.Tokens, r.SubID, millis(r.At))
			}
			for _, c := range ac.Charges {
				tw.printf("  charge\t\t%d\t\t\t%s %s (used %d, reserved %d)\n", c.Tokens, c.SubID, millis(c.At), c.UsageTokens,
					c.ReservedTokens)
			}
		}
		return tw.flush()
	})
}

func (a *app) slotsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "slots",
		Short: "The daemon-wide nested slot pool (query.slots)",
		Args:  args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.view(cmd.Context(), func(b Broker) error {
				var s broker.WireSlots
				if err := call(cmd.Context(), b, "query.slots", map[string]any{}, &s); err != nil {
					return err
				}
				s.SubIDs = nonNil(s.SubIDs)
				if a.json {
					return a.printJSON(s)
				}
				w := a.stdout()
				w.printf("slots %d/%d held\n", s.Held, s.Capacity)
				for _, sub := range s.SubIDs {
					w.printf("  %s\n", sub)
				}
				if s.SubIDsOmitted {
					// NB: the admin's pool: held counts every holder crewd left out.
					w.printf("  %d more %s\n", s.Held-len(s.SubIDs), omittedNote)
				}
				return nil
			})
		},
	}
}

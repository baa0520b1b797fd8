package main

import (
	"github.com/spf13/cobra"
)

// dashboardLink is dashboard.login's answer.
type dashboardLink struct {
	URL       string `json:"url"`
	ExpiresAt int64  `json:"expiresAt"`
}

func (a *app) dashboardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dashboard",
		Short: "Print a one-time login link to crewd's dashboard (dashboard.login)",
		Long: `dashboard asks crewd, through its socket and as its admin, for a one-time login link to the dashboard it
serves, and prints it; the link works once, within ten minutes, and opens a session of the admin. It opens
nothing: paste the link into a browser.

The link comes through crewd's own socket, so the admin token never leaves it: a client that sent the token to
the dashboard's TCP address (POST /api/v1/login) would give it to whatever process holds that address, and one
may, when crewd found it in use at start and serves no dashboard.`,
		Args: args(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.view(cmd.Context(), func(b Broker) error {
				var link dashboardLink
				if err := call(cmd.Context(), b, "dashboard.login", map[string]any{}, &link); err != nil {
					return err
				}
				if a.json {
					return a.printJSON(link)
				}
				a.stdout().printf("%s\n  works once, until %s\n", link.URL, millis(link.ExpiresAt))
				return nil
			})
		},
	}
}

package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/crewlog/crewlog/broker/client"
)

// dashboardLink asks crewd, through its socket as its admin (dashboard.login), for a one-time login link to the
// dashboard, with the admin token in tokenFile. It opens nothing: the caller prints the link. NB: not POST
// /api/v1/login: the token would go to whatever process holds the dashboard's TCP address, crewd's or not.
func dashboardLink(ctx context.Context, socket, tokenFile string) (string, error) {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("bench: admin token: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: strings.TrimSpace(string(tok))}, nil)
	if err != nil {
		return "", unreachedErr(socket, tokenFile, err)
	}
	defer c.Close()
	var out struct {
		URL string `json:"url"`
	}
	if err := c.Call(ctx, "dashboard.login", map[string]any{}, &out); err != nil {
		return "", fmt.Errorf("bench: crewd's dashboard: %w", err)
	}
	return out.URL, nil
}

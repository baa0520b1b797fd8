package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// dashboardLink asks crewd's HTTP API at addr (host:port) for a one-time login link to the dashboard, with the
// admin token in tokenFile. It opens nothing: the caller prints the link.
func dashboardLink(ctx context.Context, addr, tokenFile string) (string, error) {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("crewbench: admin token: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/login", nil)
	if err != nil {
		return "", fmt.Errorf("crewbench: --http %q: %w", addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("crewbench: crewd's dashboard at %s: %w (is crewd running with --http?)", addr, err)
	}
	defer resp.Body.Close()
	var out struct {
		URL   string `json:"url"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("crewbench: crewd's dashboard at %s answered %s %s", addr, resp.Status, out.Error.Message)
	}
	return out.URL, nil
}

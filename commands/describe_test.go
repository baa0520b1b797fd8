package commands

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestDescribeMethodMatchesParse: a request with every key DescribeMethod reports parses (so every reported key is
// read, with the reported type), one without a required key is refused, and a strict method refuses one more key
// (so no key a parse function reads is left out of the description).
func TestDescribeMethodMatchesParse(t *testing.T) {
	for _, name := range Methods() {
		t.Run(name, func(t *testing.T) {
			info, ok := DescribeMethod(name)
			require.True(t, ok)
			require.NotEmpty(t, info.Roles)
			c := Caller{Role: info.Roles[0], RunID: "R", TaskID: "T"}
			if c.Role != events.RoleWorker {
				c.TaskID = ""
			}
			full := map[string]any{}
			for _, p := range info.Params {
				require.NotEmpty(t, p.Type, "%s is read with a reader DescribeMethod cannot type", p.Name)
				full[p.Name] = sampleOf(p)
			}
			_, err := ParseCommand(name, mustJSON(t, full), c)
			require.NoError(t, err)
			for _, p := range info.Params {
				if !p.Required {
					continue
				}
				without := map[string]any{}
				for k, v := range full {
					if k != p.Name {
						without[k] = v
					}
				}
				_, err := ParseCommand(name, mustJSON(t, without), c)
				var rej *RejectedError
				require.True(t, errors.As(err, &rej), "%s without %s", name, p.Name)
				require.Equal(t, CodeBadParams, rej.Code)
				require.Contains(t, rej.Message, p.Name)
			}
			if info.Strict {
				full["notDescribed"] = 1
				_, err := ParseCommand(name, mustJSON(t, full), c)
				require.ErrorContains(t, err, `unknown field "notDescribed"`)
			}
		})
	}
	_, ok := DescribeMethod("no.such")
	require.False(t, ok)
}

func sampleOf(p ParamInfo) any {
	switch p.Type {
	case ParamInteger, ParamNumber:
		return 1
	case ParamBoolean:
		return false
	case ParamStrings:
		return []string{"T"}
	}
	if p.Name == "runId" {
		return "R"
	}
	return "T"
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

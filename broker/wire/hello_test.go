package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeHello(t *testing.T) {
	want := Hello{Protocol: 1, RunID: "run-1", TaskID: "task-1", Token: "secret"}
	long := strings.Repeat("r", 256)
	for _, tc := range []struct {
		name   string
		params string
		ok     bool
	}{
		{"valid", `{"protocol":1,"runId":"run-1","taskId":"task-1","token":"secret"}`, true},
		{"role is ignored", `{"protocol":1,"runId":"run-1","taskId":"task-1","token":"secret","role":"orchestrator"}`, true},
		{"protocol 1.0 is the number 1", `{"protocol":1.0,"runId":"run-1","taskId":"task-1","token":"secret"}`, true},
		{"protocol 2", `{"protocol":2,"runId":"run-1","taskId":"task-1","token":"secret"}`, false},
		{"protocol string", `{"protocol":"1","runId":"run-1","taskId":"task-1","token":"secret"}`, false},
		{"protocol missing", `{"runId":"run-1","taskId":"task-1","token":"secret"}`, false},
		{"runId empty", `{"protocol":1,"runId":"","taskId":"task-1","token":"secret"}`, false},
		{"taskId missing", `{"protocol":1,"runId":"run-1","token":"secret"}`, false},
		{"token not a string", `{"protocol":1,"runId":"run-1","taskId":"task-1","token":7}`, false},
		{"runId too long", `{"protocol":1,"runId":"` + long + `x","taskId":"task-1","token":"secret"}`, false},
		{"params null", `null`, false},
		{"params array", `[1]`, false},
		{"params absent", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeHello(json.RawMessage(tc.params))
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, want, got)
				return
			}
			// Always the same answer, whichever field was wrong.
			require.Equal(t, &Error{Code: CodeAuth, Message: "hello rejected"}, err)
		})
	}
	_, err := DecodeHello(json.RawMessage(`{"protocol":1,"runId":"` + long + `","taskId":"t","token":"k"}`))
	require.NoError(t, err)
}

func TestHelloStringHidesToken(t *testing.T) {
	h := Hello{Protocol: 1, RunID: "r", TaskID: "t", Token: "secret-token"}
	for _, s := range []string{h.String(), fmt.Sprint(h), fmt.Sprintf("%v %+v", h, h)} {
		require.NotContains(t, s, "secret-token")
	}
	require.Equal(t, "hello{protocol:1 runId:r taskId:t token:***}", h.String())
}

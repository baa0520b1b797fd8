package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStripCommandID(t *testing.T) {
	cases := []struct {
		name, params, id, rest string
		bad                    bool
	}{
		{"none", `{"prompt":"p"}`, "", `{"prompt":"p"}`, false},
		{"present", `{"prompt":"p","commandId":"c-1"}`, "c-1", `{"prompt":"p"}`, false},
		{"escaped key", `{"prompt":"p","\u0063ommandId":"c-2"}`, "c-2", `{"prompt":"p"}`, false},
		{"null", `{"commandId":null,"x":1}`, "", `{"x":1}`, false},
		{"not a string", `{"commandId":7}`, "", "", true},
		{"value mentions it", `{"body":"commandId"}`, "", `{"body":"commandId"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, rest, err := stripCommandID("delegate.request", json.RawMessage(c.params))
			if c.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.id, id)
			require.JSONEq(t, c.rest, string(rest))
		})
	}
}

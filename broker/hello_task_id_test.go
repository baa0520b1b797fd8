package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
)

// credential.issue refuses a task whose id a hello could not carry (commands.MaxHelloTaskIDUnits), and a hello reads
// a task id of as many UTF-16 units (wire.DecodeHello): commands may not import wire, so the two bounds are written
// twice, and this holds them equal — a token issued is one its worker can present.
func TestCredentialIssueBoundIsTheHellos(t *testing.T) {
	hello := func(taskID string) error {
		params, err := json.Marshal(map[string]any{"protocol": wire.ProtocolVersion, "runId": "R", "taskId": taskID,
			"token": "t"})
		require.NoError(t, err)
		_, err = wire.DecodeHello(params)
		return err
	}
	const emojiUnits = 2 // U+1F600 is a surrogate pair
	widest := strings.Repeat("😀", commands.MaxHelloTaskIDUnits/emojiUnits)
	require.Equal(t, commands.MaxHelloTaskIDUnits, wire.UTF16Len(widest))
	require.NoError(t, hello(widest))
	require.Error(t, hello(widest+"x"))
}

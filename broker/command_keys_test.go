package broker

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

var (
	keysWorker = commands.Caller{Role: events.RoleWorker, RunID: "R", TaskID: "T"}
	keysOrch   = commands.Caller{Role: events.RoleOrchestrator, RunID: "R"}
)

// TestCommandParamsOfMadeUpKeysCostNoMap: a command's params, a frame's worth of keys no command reads, are split and
// parsed — a worker's task.create refused forbidden, an orchestrator's task.usage refused for the least unknown key,
// a worker's msg.send, which ignores them, accepted — without a map entry and a string for each: split into a map of
// every member, 22,830 keys cost 3.2 MB per request (6.2 MB escaped), before the role was even checked, and a
// credential's MaxConnsPerCredential connections (64), a request in flight each within its burst, held a few hundred
// megabytes at once.
func TestCommandParamsOfMadeUpKeysCostNoMap(t *testing.T) {
	for _, keys := range madeUpKeySpellings {
		for _, tc := range []struct {
			method string
			caller commands.Caller
			given  string
			code   wire.Code // "": accepted
		}{
			{"task.create", keysWorker, `"taskId":"t2"`, wire.CodeForbidden},
			{"task.usage", keysOrch, `"taskId":"t2","input":1,"output":1,"cacheRead":0,"cacheWrite":0`,
				wire.CodeBadParams},
			{"msg.send", keysWorker, `"to":"orchestrator","body":"hi"`, ""},
		} {
			t.Run(keys.name+"/"+tc.method, func(t *testing.T) {
				raw := madeUpKeys(wire.DefaultMaxFrame, keys.key)
				raw = append([]byte(`{`+tc.given+`,"commandId":"c",`), raw[1:]...)
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				id, members, err := splitParams(tc.method, raw, nil)
				require.NoError(t, err)
				_, err = commands.ParseMembers(tc.method, members, tc.caller)
				runtime.ReadMemStats(&after)
				require.Equal(t, "c", id)
				if tc.code == "" {
					require.NoError(t, err)
				} else {
					e, _ := toWire(err, tc.method)
					require.Equal(t, tc.code, e.Code)
				}
				if tc.code == wire.CodeBadParams && keys.least != "" {
					require.ErrorContains(t, err, fmt.Sprintf("unknown field %q", keys.least))
				}
				// NB: the bound is a few of the longest keys, the refusal and the command, not a count of keys.
				require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<10),
					"bytes allocated for %d bytes of params", len(raw))
			})
		}
	}
}

// TestCommandParamsAnswerAsTheMapDid: whatever keys a command's params hold besides its own — made up (one, many,
// less or greater than its own), escaped, repeated, another method's, or spelling one of its own with an escape —
// splitting them (ParseMembers) gives every method, for every role it admits, the command or the refusal that
// decoding them whole into a map gave (ParseCommand).
func TestCommandParamsAnswerAsTheMapDid(t *testing.T) {
	sample := func(p commands.ParamInfo) string {
		switch p.Type {
		case commands.ParamInteger, commands.ParamNumber:
			return "1"
		case commands.ParamBoolean:
			return "false"
		case commands.ParamStrings:
			return `["T"]`
		}
		if p.Name == "runId" {
			return `"R"`
		}
		return `"T"`
	}
	extras := []string{
		``, `"zz":1`, `"!":1,"zz":2`, `"\u0061":1,"a":2,"\u0061":3`, `"\u0074askId":"T2"`, `"prompt":"p","text":"x"`,
		`"b":1,"a":[{"c":"}"}],"":null`, `"\ud83d":1,"\ude00":2`, `"taskId":null`, `"é":1,"e":2`,
	}
	for _, method := range commands.Methods() {
		info, ok := commands.DescribeMethod(method)
		require.True(t, ok)
		var own []string
		for _, p := range info.Params {
			own = append(own, fmt.Sprintf("%q:%s", p.Name, sample(p)))
		}
		for _, role := range info.Roles {
			c := commands.Caller{Role: role, RunID: "R", TaskID: "T"}
			if role != events.RoleWorker {
				c.TaskID = ""
			}
			for _, withOwn := range []bool{true, false} {
				for _, extra := range extras {
					members := extra
					if withOwn {
						members = strings.Join(append(own[:len(own):len(own)], extra), ",")
					}
					members = strings.TrimSuffix(members, ",")
					params := []byte("{" + members + "}")
					require.True(t, json.Valid(params), "%s", params)
					want, wantErr := commands.ParseCommand(method, params, c)
					_, split, err := splitParams(method, params, nil)
					require.NoError(t, err)
					got, gotErr := commands.ParseMembers(method, split, c)
					require.Equal(t, wantErr, gotErr, "%s as %s: %s", method, role, params)
					require.Equal(t, want, got, "%s as %s: %s", method, role, params)
				}
			}
		}
	}
}

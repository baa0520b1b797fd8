package broker

import (
	"encoding/json"
	"testing"
)

// FuzzDispatch sends one arbitrary frame after a valid (admin) hello, then a ping: the server must answer the
// ping or close the connection — never panic, never hang — and keep serving new connections.
func FuzzDispatch(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","method":"ping","params":null}`,
		`{"id":"1","method":"run.create","params":{"runId":"F1","team":"t","goal":"g","cwd":"/w"}}`,
		`{"id":"1","method":"events.since","params":{"runId":"R1","sinceSeq":3,"limit":2}}`,
		`{"id":"1","method":"events.subscribe","params":{"runId":"R1","types":["task.usage"]}}`,
		`{"id":"1","method":"task.waitStatus","params":{"runId":"R1","taskId":"P","until":"running","timeoutMs":0}}`,
		`{"id":"1","method":"msg.inbox","params":{"runId":"R1","limit":1e309}}`,
		`{"id":"1","method":"query.mailbox","params":{"runId":"R1","cursor":"\u0000"}}`,
		`{"id":"1","method":"msg.send","params":{"runId":"R1","to":["P","Q"],"body":{"a":[1,2]},"commandId":"x"}}`,
		`{"id":"1","method":"hello","params":{}}`,
		`{"id":"1","method":"delegate.request","params":{"prompt":"x"}}`,
		`{"id":"1","method":"query.runs","params":{"status":[1]}}`,
		`not json`,
	} {
		f.Add(seed)
	}
	fx := newFixture(f, fixtureOpts{})
	fx.seed()
	f.Fuzz(func(t *testing.T, frame string) {
		c := fx.dialAs(t)
		c.helloAdmin()
		c.nc.Write([]byte(frame + "\n"))
		c.nc.Write([]byte(`{"id":"zz-ping","method":"ping","params":null}` + "\n"))
		for {
			fr, err := c.read()
			if err != nil {
				if !isEOF(err) {
					t.Fatalf("neither an answer nor a close: %v", err)
				}
				break
			}
			var r struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(fr, &r) == nil && r.ID == "zz-ping" {
				break
			}
		}
		c.nc.Close()
		if fx.panics.Load() > 0 {
			t.Fatalf("the server panicked on frame %q", frame)
		}
	})
}

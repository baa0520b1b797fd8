package client

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestCheckBroker: CheckBroker sees the listening process's real uid, and its refusal ends the dial before the
// hello, and its token, are written.
func TestCheckBroker(t *testing.T) {
	t.Run("refused: no hello sent", func(t *testing.T) {
		b := newFakeBroker(t, pingHandler())
		b.hello = func(json.RawMessage) *wire.Error {
			b.errorf("the hello reached a broker CheckBroker refused")
			return nil
		}
		var seen int
		_, err := Dial(testCtx(t), b.path, worker, &Options{CheckBroker: func(uid int) error {
			seen = uid
			return errors.New("not ours")
		}})
		require.ErrorContains(t, err, "not ours")
		require.Equal(t, os.Geteuid(), seen)
	})
	t.Run("accepted", func(t *testing.T) {
		b := newFakeBroker(t, pingHandler())
		c := dialT(t, b, worker, &Options{CheckBroker: func(uid int) error {
			if uid != os.Geteuid() {
				return errors.New("not ours")
			}
			return nil
		}})
		require.NoError(t, c.Call(testCtx(t), wire.MethodPing, nil, nil))
	})
}

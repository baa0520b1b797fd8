package eventlog

import (
	"context"
	"fmt"
	"log/slog"
)

// pebbleLogger adapts *slog.Logger to Pebble's Logger interface.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf must not return (Pebble relies on it). A panic rather than
// os.Exit lets tests observe it and lets a daemon's supervisor restart it.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("eventlog: pebble fatal: " + msg)
}

package natslog

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// A NATS URL may carry a password, or a token as its user: a URL that does not parse must not put either into
// Connect's error, which crewd and crewctl print to a terminal or a journal.
func TestConnectErrorLeavesOutURLCredentials(t *testing.T) {
	type leak struct{ name, urls, secret string }
	for _, tc := range []leak{
		{"password with a bad escape", "nats://alice:s3cret-Pw%zz@127.0.0.1:4222", "s3cret-Pw"},
		{"token as the user", "nats://T0ken-4b1f9e%zz@127.0.0.1:4222", "T0ken-4b1f9e"},
		{"second URL's host unclosed", "nats://bob:0ther-pw@127.0.0.1:4222,nats://carol:s3cret-Pw@[::1", "s3cret-Pw"},
		{"no scheme", "carol:s3cret-Pw@[::1", "s3cret-Pw"},
		{"quoted in the message", `nats://dave:s3cret"Pw%zz@127.0.0.1:4222`, `s3cret"Pw`},
		{"spaces around the URL", " nats://erin:s3cret-Pw%zz@127.0.0.1:4222 ", "s3cret-Pw"},
		{"a slash in the password", "nats://frank:s3cret/Pw%zz@127.0.0.1:4222", "s3cret/Pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := Connect(tc.urls, ConnectOptions{Name: "test"})
			if nc != nil {
				nc.Close()
			}
			require.Error(t, err)
			msg := err.Error()
			require.Contains(t, msg, "natslog: connect")
			require.Contains(t, msg, "***", "the URL is still named, its userinfo left out")
			for _, form := range []string{tc.secret, `s3cret\"Pw`, base64.StdEncoding.EncodeToString([]byte(tc.secret)),
				base64.RawURLEncoding.EncodeToString([]byte(tc.secret)), hex.EncodeToString([]byte(tc.secret))} {
				require.NotContains(t, msg, form)
			}
		})
	}
}

// A short userinfo is cut out of the URL only, not out of the words of the error that hold its letters.
func TestConnectErrorKeepsItsWords(t *testing.T) {
	nc, err := Connect("nats://a@127.0.0.1:1", ConnectOptions{Name: "test"})
	if nc != nil {
		nc.Close()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "no servers available for connection")
}

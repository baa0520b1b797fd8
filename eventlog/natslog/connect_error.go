package natslog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// connectError is Connect's error for err, a failure of nats.Connect to reach urls. NB: a URL that does not parse
// comes back whole in the error (net/url quotes it), and a NATS URL's userinfo is a secret: a user and password, or
// a token as the user. crewd and crewctl print the error, so every URL's userinfo is cut out of its text; an error
// that held one is not wrapped, so no caller reaches the original text through Unwrap.
func connectError(urls string, err error) error {
	msg := err.Error()
	redacted := msg
	for _, u := range strings.Split(urls, ",") {
		ui := urlUserinfo(u)
		if ui == "" {
			continue
		}
		// NB: with its '@', which follows it in every URL the error quotes: a short userinfo alone ("a") is in
		// other words of the text too.
		redacted = strings.ReplaceAll(redacted, ui+"@", "***@")
		if q := strconv.Quote(ui + "@"); q[1:len(q)-1] != ui+"@" {
			redacted = strings.ReplaceAll(redacted, q[1:len(q)-1], "***@")
		}
	}
	if redacted == msg {
		return fmt.Errorf("natslog: connect: %w", err)
	}
	return errors.New("natslog: connect: " + redacted)
}

// urlUserinfo is what precedes the host of a NATS URL that may not parse: everything after the scheme up to its
// last '@' ("" without one). It reaches past a '/' in the password, where net/url would see a path, so that such a
// URL's secret is cut out too.
func urlUserinfo(u string) string {
	u = strings.TrimSpace(u)
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+len("://"):]
	}
	at := strings.LastIndexByte(u, '@')
	if at <= 0 {
		return ""
	}
	return u[:at]
}

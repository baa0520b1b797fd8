package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/crewlog/crewlog/projections"
)

// A job's grant (D§9 T1–T3) arrives as a JSON array of tool manifests. Each
// is checked and reduced to its name, its fingerprint (the sha-256 of the
// canonical JSON of T2's fields: object keys sorted recursively, numbers as
// JavaScript prints them) and its callable identity, which is all that is
// kept and all revalidation (T4) compares.

// Bounds of a grant besides its byte limit (the config's ManifestBytes).
const (
	MaxJobTools      = 256
	MaxToolNameChars = 256
	// maxJSONDepth bounds nesting in any client JSON the job commands
	// canonicalise, so a hostile value cannot exhaust the stack.
	maxJSONDepth = 64
)

// manifestTool is one granted tool as the job keeps it.
type manifestTool struct {
	name, fingerprint, callable string
	readOnly                    bool
}

// manifestError is a grant refused by T1–T3: the rule's reason, the index
// and name of the tool it found (-1 and "" for the whole list) and the
// bytes it measured.
type manifestError struct {
	reason string
	index  int
	tool   string
	bytes  int64
	msg    string
}

// Reasons of a refused grant (job.rejected, op create).
const (
	reasonManifestInvalid  = "manifest-invalid"
	reasonManifestTooLarge = "manifest-too-large"
	reasonToolName         = "tool-name"
	reasonToolDuplicate    = "tool-duplicate"
	reasonDelegationTool   = "delegation-tool"
	reasonNotCallable      = "not-callable"
	reasonNotJSONSafe      = "not-json-safe"
)

// delegationTool reports whether name is one of the dispatcher's own
// delegation tools, which a grant may never include (T1: no recursive
// delegation): delegate_control, delegate_status and every role's
// delegate_<role> tool.
func delegationTool(name string) bool {
	return name == "delegate" || strings.HasPrefix(name, "delegate_")
}

// fingerprintFields are T2's fields; sourceInfo's are checked apart.
var (
	requiredToolFields = []string{"name", "label", "description", "parameters", "sourceInfo"}
	optionalToolFields = []string{"outputSchema", "namespace", "annotations", "promptGuidelines", "executionMode"}
)

// parseManifest checks a grant against T1–T3 and limit (T2's 8 MiB over the
// canonical list) and reduces it to its tools and the digest of the whole
// canonical list.
func parseManifest(raw json.RawMessage, limit int64) ([]manifestTool, int64, string, *manifestError) {
	if int64(len(raw)) > 2*limit+1024 {
		// The canonical form is never much smaller than compact JSON;
		// refusing early bounds the work on a huge value.
		return nil, int64(len(raw)), "", &manifestError{reason: reasonManifestTooLarge, index: -1,
			bytes: int64(len(raw)), msg: fmt.Sprintf("tool manifest of %d bytes exceeds the %d-byte limit",
				len(raw), limit)}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, 0, "", &manifestError{reason: reasonManifestInvalid, index: -1,
			msg: "tools must be an array of tool manifests"}
	}
	if len(items) > MaxJobTools {
		return nil, 0, "", &manifestError{reason: reasonManifestInvalid, index: -1,
			msg: fmt.Sprintf("a grant holds at most %d tools, got %d", MaxJobTools, len(items))}
	}
	var list bytes.Buffer
	list.WriteByte('[')
	tools := make([]manifestTool, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		t, canon, merr := parseTool(i, item)
		if merr != nil {
			return nil, 0, "", merr
		}
		if seen[t.name] {
			return nil, 0, "", &manifestError{reason: reasonToolDuplicate, index: i, tool: t.name,
				msg: fmt.Sprintf("tool %q is granted twice", t.name)}
		}
		seen[t.name] = true
		if i > 0 {
			list.WriteByte(',')
		}
		list.Write(canon)
		if n := int64(list.Len()) + 1; n > limit {
			return nil, n, "", &manifestError{reason: reasonManifestTooLarge, index: i, tool: t.name, bytes: n,
				msg: fmt.Sprintf("tool manifest exceeds the %d-byte limit at tool %d (%q)", limit, i, t.name)}
		}
		tools = append(tools, t)
	}
	list.WriteByte(']')
	sum := sha256.Sum256(list.Bytes())
	return tools, int64(list.Len()), hex.EncodeToString(sum[:]), nil
}

// parseTool checks one tool manifest (T1–T3) and returns it with the
// canonical JSON its fingerprint digests.
func parseTool(i int, item json.RawMessage) (manifestTool, []byte, *manifestError) {
	bad := func(reason, name, format string, args ...any) *manifestError {
		// NB: cut, since the message is recorded (job.rejected, the
		// revalidation failure's got) and may quote a client's key or
		// number of any length.
		return &manifestError{reason: reason, index: i, tool: name,
			msg: cutMessage(fmt.Sprintf("tool %d: ", i) + fmt.Sprintf(format, args...))}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
		return manifestTool{}, nil, bad(reasonManifestInvalid, "", "a tool manifest must be an object")
	}
	var name string
	if json.Unmarshal(fields["name"], &name) != nil || fields["name"] == nil {
		return manifestTool{}, nil, bad(reasonToolName, "", "name must be a string")
	}
	switch {
	case name == "" || longerThan(name, MaxToolNameChars):
		return manifestTool{}, nil, bad(reasonToolName, "", "name must be 1..%d chars", MaxToolNameChars)
	case strings.TrimSpace(name) != name:
		return manifestTool{}, nil, bad(reasonToolName, name, "name %q has surrounding whitespace", name)
	case delegationTool(name):
		return manifestTool{}, nil, bad(reasonDelegationTool, name,
			"%q is a delegation tool: a job cannot delegate", name)
	}
	var callable string
	if v, ok := fields["callable"]; ok && (json.Unmarshal(v, &callable) != nil || longerThan(callable, MaxIDChars)) {
		return manifestTool{}, nil, bad(reasonManifestInvalid, name,
			"callable must be a string of at most %d chars", MaxIDChars)
	}
	if callable == "" && name != projections.CodemodeTool {
		return manifestTool{}, nil, bad(reasonNotCallable, name,
			"%q is not callable through the manager context", name)
	}
	kept := make(map[string]json.RawMessage, len(fields))
	for _, k := range requiredToolFields {
		v, ok := fields[k]
		if !ok {
			return manifestTool{}, nil, bad(reasonManifestInvalid, name, "%s is required", k)
		}
		kept[k] = v
	}
	for _, k := range optionalToolFields {
		if v, ok := fields[k]; ok {
			kept[k] = v
		}
	}
	if merr := checkSourceInfo(fields["sourceInfo"]); merr != "" {
		return manifestTool{}, nil, bad(reasonManifestInvalid, name, "sourceInfo: %s", merr)
	}
	if err := keyTwice(item); err != nil {
		return manifestTool{}, nil, bad(reasonNotJSONSafe, name, "%v", err)
	}
	var canon bytes.Buffer
	if err := canonicalJSON(&canon, mustMarshal(kept), 0); err != nil {
		return manifestTool{}, nil, bad(reasonNotJSONSafe, name, "%v", err)
	}
	// NB: a map, whose keys match exactly, as JSON.parse's do: a struct field would take "READONLYHINT" too, the
	// last of both spellings winning over the readOnlyHint T20 reads.
	var ann map[string]json.RawMessage
	_ = json.Unmarshal(fields["annotations"], &ann)
	sum := sha256.Sum256(canon.Bytes())
	return manifestTool{
		name: name, fingerprint: hex.EncodeToString(sum[:]), callable: callable,
		readOnly: string(ann["readOnlyHint"]) == "true", // T20: exactly true, nothing truthy
	}, canon.Bytes(), nil
}

// checkSourceInfo checks T2's sourceInfo: path and source strings, scope and
// origin from their sets, baseDir an optional string.
func checkSourceInfo(raw json.RawMessage) string {
	var si map[string]json.RawMessage
	if json.Unmarshal(raw, &si) != nil || si == nil {
		return "must be an object"
	}
	str := func(k string, required bool, allowed ...string) string {
		v, ok := si[k]
		if !ok {
			if required {
				return k + " is required"
			}
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return k + " must be a string"
		}
		if len(allowed) > 0 && !slices.Contains(allowed, s) {
			return fmt.Sprintf("%s must be one of %s", k, strings.Join(allowed, ", "))
		}
		return ""
	}
	for _, msg := range []string{
		str("path", true), str("source", true), str("scope", true, "user", "project", "temporary"),
		str("origin", true, "package", "top-level"), str("baseDir", false),
	} {
		if msg != "" {
			return msg
		}
	}
	// NB: the first unknown key in key order, not in the map's: a decision
	// (and the job.rejected it records) is a function of its input alone.
	var unknown []string
	for k := range si {
		if !slices.Contains([]string{"path", "source", "scope", "origin", "baseDir"}, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return fmt.Sprintf("unknown field %q", slices.Min(unknown))
	}
	return ""
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a map of json.RawMessage read from valid JSON always marshals
	}
	return b
}

// revalidate compares the manager's current grant with the job's (T4):
// the same count, the same order, the same name and fingerprint at every
// index, and the same callable identity for every tool but codemode. It
// returns the first difference: the index (-1 for the count), the cause,
// and what was wanted and found.
func revalidate(want, got []manifestTool) (index int, cause, wantS, gotS string, ok bool) {
	if len(want) != len(got) {
		return -1, "count", strconv.Itoa(len(want)), strconv.Itoa(len(got)), false
	}
	for i := range want {
		w, g := want[i], got[i]
		switch {
		case w.name != g.name:
			return i, "name", w.name, g.name, false
		case w.fingerprint != g.fingerprint:
			return i, "fingerprint", w.fingerprint, g.fingerprint, false
		case w.name != projections.CodemodeTool && w.callable != g.callable:
			return i, "callable", w.callable, g.callable, false
		}
	}
	return 0, "", "", "", true
}

// keyTwice refuses an object whose top level holds a key twice, as
// canonicalJSON refuses one deeper (T3): decoding the object into a map,
// as a tool manifest and a result are, keeps the last of the two.
func keyTwice(object json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(object))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil // not an object: its decoding says so
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := t.(string)
		if seen[key] {
			return fmt.Errorf("%w: key %q appears twice", errNotJSONSafe, key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// proxyResultFields are the fields of a tool result the proxy keeps (T14):
// usage, details and anything else are stripped.
var proxyResultFields = []string{"content", "structuredContent", "isError", "terminate"}

// ShapeProxyResult keeps T14's fields of a result object, canonical and
// JSON-safe (T3), and tells whether it is an error result: the result as
// proxy.completed records it and proxy.result answers it.
func ShapeProxyResult(raw json.RawMessage) (string, bool, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "", false, errors.New("result must be an object")
	}
	if err := keyTwice(raw); err != nil {
		return "", false, err
	}
	kept := make(map[string]json.RawMessage, len(proxyResultFields))
	for _, k := range proxyResultFields {
		if v, ok := fields[k]; ok {
			kept[k] = v
		}
	}
	var b bytes.Buffer
	if err := canonicalJSON(&b, mustMarshal(kept), 0); err != nil {
		return "", false, err
	}
	return b.String(), string(bytes.TrimSpace(kept["isError"])) == "true", nil
}

// JSONSafeArgs checks proxied arguments (T3) and returns them canonical: the arguments as proxy.requested records
// them.
func JSONSafeArgs(raw json.RawMessage) (string, error) {
	var b bytes.Buffer
	if err := canonicalJSON(&b, raw, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

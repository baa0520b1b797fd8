package broker

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// quotaCodes are the codes of a run's quotas. docs/protocol.md's "**Quotas**:" paragraph names, for each, the methods
// that may answer it, and a method's Errors list names it as well.
var quotaCodes = []wire.Code{wire.CodeQuotaExceeded, wire.CodeRateLimit}

// TestProtocolDocQuotas: the "**Quotas**:" paragraph of docs/protocol.md names, for each quota code, exactly the
// methods docs/protocol.json lists it for (what Describe says): a method the description gives the code and the
// paragraph leaves out fails, and so does one the paragraph names that the description does not give it.
func TestProtocolDocQuotas(t *testing.T) {
	raw, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	d, err := Describe()
	require.NoError(t, err)
	paras := regexp.MustCompile(`(?m)^\*\*Quotas\*\*:[^\n]*(?:\n[^\n]+)*`).FindAllString(string(raw), -1)
	require.Len(t, paras, 1, `docs/protocol.md must have one "**Quotas**:" paragraph`)
	methods := map[string]bool{}
	for _, m := range d.Methods {
		methods[m.Name] = true
	}
	named, err := docQuotaMethods(paras[0], methods)
	require.NoError(t, err)
	for _, c := range quotaCodes {
		t.Run(string(c), func(t *testing.T) {
			var missing, extra []string
			for _, m := range d.Methods {
				if slices.Contains(m.Errors, c) && !named[c][m.Name] {
					missing = append(missing, m.Name)
				}
				if !slices.Contains(m.Errors, c) && named[c][m.Name] {
					extra = append(extra, m.Name)
				}
			}
			require.Empty(t, missing, "docs/protocol.md's Quotas paragraph leaves out methods protocol.json lists %s for", c)
			require.Empty(t, extra, "docs/protocol.md's Quotas paragraph says these methods may answer %s, which "+
				"protocol.json does not list for them", c)
		})
	}
}

// docQuotaMethods reads the Quotas paragraph: each clause (ended by a semicolon or a full stop, see docClauses)
// names in backticks methods and the quota codes they may answer. It returns, for each code, the methods the
// paragraph gives it. An error when a clause names methods and no quota code, or a code and no method, or names
// something in backticks outside parentheses that is neither a method nor a quota code.
func docQuotaMethods(para string, methods map[string]bool) (map[wire.Code]map[string]bool, error) {
	clauses, err := docClauses(para, ";", false)
	if err != nil {
		return nil, err
	}
	out := map[wire.Code]map[string]bool{}
	for _, toks := range clauses {
		var ms []string
		var cs []wire.Code
		for _, tok := range toks {
			switch {
			case methods[tok]:
				ms = append(ms, tok)
			case slices.Contains(quotaCodes, wire.Code(tok)):
				cs = append(cs, wire.Code(tok))
			default:
				return nil, fmt.Errorf("the Quotas paragraph names `%s`, which is neither a method nor a quota code", tok)
			}
		}
		if (len(ms) == 0) != (len(cs) == 0) {
			return nil, fmt.Errorf("a clause of the Quotas paragraph names %q: methods and no quota code, or a "+
				"code and no method", toks)
		}
		for _, c := range cs {
			if out[c] == nil {
				out[c] = map[string]bool{}
			}
			for _, m := range ms {
				out[c][m] = true
			}
		}
	}
	return out, nil
}

// TestDocQuotaMethods: what TestProtocolDocQuotas reads of the paragraph.
func TestDocQuotaMethods(t *testing.T) {
	methods := map[string]bool{"msg.send": true, "escalate": true, "task.usage": true, "wait.resolve": true}
	for _, tc := range []struct {
		name, para string
		want       map[wire.Code][]string // nil: an error
	}{
		{"a clause", "**Quotas**: `msg.send` and `escalate` may answer `quota-exceeded` or `rate-limit`.",
			map[wire.Code][]string{"quota-exceeded": {"escalate", "msg.send"}, "rate-limit": {"escalate", "msg.send"}}},
		{"clauses", "**Quotas**: `msg.send` may answer `rate-limit`; `task.usage`, and so may\n`wait.resolve`, " +
			"`quota-exceeded` (see [the quotas](#run-quotas)). No other method answers either.",
			map[wire.Code][]string{"rate-limit": {"msg.send"}, "quota-exceeded": {"task.usage", "wait.resolve"}}},
		{"the code first", "**Quotas**: `quota-exceeded` is answered by `escalate`.",
			map[wire.Code][]string{"quota-exceeded": {"escalate"}}},
		{"parentheses explain", "**Quotas**: `task.usage` (not `msg.send`. Nor `x.y`) may answer `quota-exceeded`.",
			map[wire.Code][]string{"quota-exceeded": {"task.usage"}}},
		{"none", "**Quotas**: none.", map[wire.Code][]string{}},
		{"methods and no code", "**Quotas**: `msg.send` may answer `rate-limit`. So may `escalate`.", nil},
		{"a code and no method", "**Quotas**: `msg.send`; `rate-limit`.", nil},
		{"no method", "**Quotas**: `msg.sent` may answer `rate-limit`.", nil},
		{"another code", "**Quotas**: `msg.send` may answer `rate-limit` or `forbidden`.", nil},
		{"unclosed parenthesis", "**Quotas**: `msg.send` may answer `rate-limit` (see", nil},
		{"unclosed backtick", "**Quotas**: `msg.send` may answer `rate-limit", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := docQuotaMethods(tc.para, methods)
			if tc.want == nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.ElementsMatch(t, slices.Collect(maps.Keys(tc.want)), slices.Collect(maps.Keys(got)))
			for c, ms := range tc.want {
				require.ElementsMatch(t, ms, slices.Collect(maps.Keys(got[c])), c)
			}
		})
	}
}

package picrew

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxTimeMs is the latest pi-crew time the import records: crewlog's
// events carry unix nanoseconds in an int64 (up to the year 2262), and the
// daemon's import.append takes source times up to this one (commands'
// maxImportTimeMs, pinned by TestTimeRangeIsWhatTheDaemonTakes).
const maxTimeMs = 9e12

// timeRange says, in a report, which times the import records.
var timeRange = fmt.Sprintf("unix ms 1..%d, or RFC 3339 from 1970 to %d",
	int64(maxTimeMs), time.UnixMilli(maxTimeMs).UTC().Year())

// flexTime is a pi-crew time: unix milliseconds, or an RFC 3339 string.
//
// The rule, the same for the one-shot import and the follower, since both
// decode every pi-crew time here: a time that is absent (null, "", 0) or
// damaged is 0, and the planner puts the run's createdAt in its place (or,
// when that is 0 too, the clock of whoever records it: the daemon's, or the
// one-shot import's Options.Clock). A time is damaged when it is not one
// crewlog's events can carry: before 1970, after maxTimeMs, a string that
// is not RFC 3339, any other JSON value. It keeps what was written (bad),
// and the parser of its record reports it (reportTimes).
//
// NB: a damaged time is not a damaged record. Refusing the record would
// lose a run for a manifest's updatedAt, a task for its finishedAt, an
// event for its time; keeping the time as read would overflow the event's
// nanoseconds (1e300 ms recorded as 1970) or be refused by the daemon (a
// follower would lose the record the one-shot import keeps). Taking the
// time as absent loses only the time, and a line says so.
type flexTime struct {
	ms  int64  // unix ms, 1..maxTimeMs; 0 = absent or damaged
	bad string // the value as written, when damaged
}

// UnmarshalJSON never fails: a damaged time is recorded as such.
func (t *flexTime) UnmarshalJSON(b []byte) error {
	*t = flexTime{}
	if string(b) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s == "" {
			return nil
		}
		if tm, err := time.Parse(time.RFC3339Nano, s); err == nil && inTimeRange(float64(tm.UnixMilli())) {
			t.ms = tm.UnixMilli()
			return nil
		}
	} else if n, err := parseNumber(b); err == nil && (n == 0 || inTimeRange(n)) {
		t.ms = int64(n)
		return nil
	}
	t.bad = clip(string(b))
	return nil
}

func parseNumber(b []byte) (float64, error) {
	var n float64
	err := json.Unmarshal(b, &n)
	return n, err
}

// inTimeRange reports whether n (unix ms) is a time the import records.
func inTimeRange(n float64) bool { return n >= 1 && n <= maxTimeMs }

var flexTimeType = reflect.TypeFor[flexTime]()

// damagedTimes lists the damaged times of a decoded record (a pointer to
// a struct), as "name value", name being the JSON name (nested ones
// dotted). It walks the record, so a time field added later is reported
// without a line of its own.
func damagedTimes(rec any) []string {
	var out []string
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if v.Type() == flexTimeType {
			if bad := v.FieldByName("bad").String(); bad != "" {
				out = append(out, strings.TrimSuffix(prefix, ".")+" "+bad)
			}
			return
		}
		if v.Kind() != reflect.Struct {
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				walk(prefix+jsonName(f)+".", v.Field(i))
			}
		}
	}
	walk("", reflect.ValueOf(rec))
	return out
}

// jsonName is the name a field is written under: its tag's, else its own
// with a lower-case first letter (encoding/json matches either).
func jsonName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" {
		return name
	}
	r, n := utf8.DecodeRuneInString(f.Name)
	return string(unicode.ToLower(r)) + f.Name[n:]
}

// reportTimes reports each damaged time of rec (see flexTime), read from
// line (0: a whole file) of rel; what names the record in a file of many
// ("task 01_plan: ") and prefix where the times sit in it ("data.").
func (s *source) reportTimes(run, rel string, line int, seq uint64, what, prefix string, rec any) {
	for _, d := range damagedTimes(rec) {
		s.skip(run, rel, line, seq, "%s%s%s is not a time crewlog records (%s): taken as absent", what, prefix,
			d, timeRange)
	}
}

package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Difference is one place where two JSON documents differ. Path is a JSON
// path ("$.runs[0].status"); a side that has nothing there is "(absent)".
type Difference struct {
	Path  string `json:"path"`
	Left  string `json:"left"`
	Right string `json:"right"`
}

// absent marks a side of a Difference that has no value at the path.
const absent = "(absent)"

// Diff compares the JSON encodings of a and b and lists every difference,
// in document order (object keys sorted). Numbers are compared as written,
// so 1 and 1.0 differ only if their encodings do. The records of a list that
// each name an id (recordIDKeys: a View's runs, tasks, delegations and
// accounts) are paired by it, so a record one side lacks is one difference,
// named by its index on the side that holds it; other lists are compared
// index by index. NB: every one, however many: for states that may differ
// everywhere (a damaged store), DiffAtMost.
func Diff(a, b any) ([]Difference, error) {
	d, err := DiffAtMost(a, b, 0)
	return d.Listed, err
}

// Differences is what DiffAtMost found: the first differences, in document order, and how many there are in all.
type Differences struct {
	Listed []Difference
	Total  int
}

// DiffAtMost compares a and b as Diff does, but lists only the first most differences (most <= 0: every one) and
// counts the rest. NB: a store whose snapshot or log is damaged can differ from a rebuilt state at millions of
// places: listed, each holds the texts of its sides (whole records, for one a side lacks), and the list grew as
// large as the state and printed as many lines; counted, a difference beyond the first costs nothing, its texts
// not made.
func DiffAtMost(a, b any, most int) (Differences, error) {
	va, err := generic(a)
	if err != nil {
		return Differences{}, err
	}
	vb, err := generic(b)
	if err != nil {
		return Differences{}, err
	}
	l := diffList{most: most}
	diffValues("$", va, vb, &l)
	return Differences{Listed: l.listed, Total: l.total}, nil
}

// diffList gathers a comparison's differences: it counts every one, and keeps the first most (most <= 0: all).
type diffList struct {
	most   int
	listed []Difference
	total  int
}

// add counts a difference at path whose sides are left and right (sideText) and keeps it while the list has room,
// only then writing its sides' texts.
func (l *diffList) add(path string, left, right any) {
	l.total++
	if l.most > 0 && len(l.listed) >= l.most {
		return
	}
	l.listed = append(l.listed, Difference{path, sideText(left), sideText(right)})
}

// absentSide is the side of a difference that has no value at its path.
type absentSide struct{}

// madeText is the side of a difference whose text is made already (to compare it).
type madeText string

// sideText is the text of a difference's side v: absent, the text made, or v's compact JSON.
func sideText(v any) string {
	switch v := v.(type) {
	case absentSide:
		return absent
	case madeText:
		return string(v)
	}
	return text(v)
}

// generic turns v into maps, slices and json.Numbers.
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("audit: diff: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("audit: diff: %w", err)
	}
	return out, nil
}

func diffValues(path string, a, b any, out *diffList) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(x)+len(y))
			for k := range x {
				keys = append(keys, k)
			}
			for k := range y {
				if _, ok := x[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				va, oka := x[k]
				vb, okb := y[k]
				p := path + "." + k
				switch {
				case !oka:
					out.add(p, absentSide{}, vb)
				case !okb:
					out.add(p, va, absentSide{})
				default:
					diffValues(p, va, vb, out)
				}
			}
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			i, j := 0, 0
			if ix, iy, ok := recordIDs(x, y); ok {
				i, j = diffRecords(path, x, y, ix, iy, out)
			}
			for ; i < len(x) || j < len(y); i, j = i+1, j+1 {
				switch {
				case i >= len(x):
					out.add(index(path, j), absentSide{}, y[j])
				case j >= len(y):
					out.add(index(path, i), x[i], absentSide{})
				default:
					diffValues(index(path, i), x[i], y[j], out)
				}
			}
			return
		}
	}
	if ta, tb := text(a), text(b); ta != tb {
		out.add(path, madeText(ta), madeText(tb))
	}
}

// index is the path of element i of the array at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// recordIDKeys are the fields that name a record of the lists a View holds, in the order they are tried: a
// delegation's subId before its parent's taskId, a task's id, an account's taskId, a run's run.runId.
var recordIDKeys = [][]string{{"subId"}, {"id"}, {"taskId"}, {"run", "runId"}}

// recordIDs are the ids of the records of x and y, in order, by the first of recordIDKeys that names every one of
// both once (within its side); ok is false when none does (a list of anything but records, or ids that repeat).
func recordIDs(x, y []any) (ix, iy recordList, ok bool) {
	for _, key := range recordIDKeys {
		if ix, ok = idsBy(x, key); !ok {
			continue
		}
		if iy, ok = idsBy(y, key); ok {
			return ix, iy, true
		}
	}
	return recordList{}, recordList{}, false
}

// recordList is the ids of a list's records: in order, and as a set.
type recordList struct {
	ids []string
	set map[string]bool
}

// idsBy is the ids each record of list has at key (a path of fields); ok is false when one has none, or two the same.
func idsBy(list []any, key []string) (recordList, bool) {
	r := recordList{ids: make([]string, len(list)), set: make(map[string]bool, len(list))}
	for i, v := range list {
		for _, k := range key {
			m, _ := v.(map[string]any)
			v = m[k] // NB: nil for a value that is no record
		}
		id, ok := v.(string)
		if !ok || id == "" || r.set[id] {
			return recordList{}, false
		}
		r.ids[i], r.set[id] = id, true
	}
	return r, true
}

// diffRecords compares the records of x and y (ids ix and iy) paired by id, in order: a record one side lacks is
// one difference, named by its index on the side that has it, where an index-by-index comparison made one of every
// field that tells each record after it from its neighbour. It stops at the first two records both sides hold in
// another order (a difference of the order, which an index-by-index comparison of the rest shows) and returns where.
func diffRecords(path string, x, y []any, ix, iy recordList, out *diffList) (i, j int) {
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && ix.ids[i] == iy.ids[j]:
			diffValues(index(path, i), x[i], y[j], out)
			i, j = i+1, j+1
		case i < len(x) && !iy.set[ix.ids[i]]:
			out.add(index(path, i), x[i], absentSide{})
			i++
		case j < len(y) && !ix.set[iy.ids[j]]:
			out.add(index(path, j), absentSide{}, y[j])
			j++
		default:
			return i, j
		}
	}
	return i, j
}

// text is the compact JSON of v.
func text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

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
// so 1 and 1.0 differ only if their encodings do.
func Diff(a, b any) ([]Difference, error) {
	va, err := generic(a)
	if err != nil {
		return nil, err
	}
	vb, err := generic(b)
	if err != nil {
		return nil, err
	}
	var out []Difference
	diffValues("$", va, vb, &out)
	return out, nil
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

func diffValues(path string, a, b any, out *[]Difference) {
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
					*out = append(*out, Difference{p, absent, text(vb)})
				case !okb:
					*out = append(*out, Difference{p, text(va), absent})
				default:
					diffValues(p, va, vb, out)
				}
			}
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			for i := 0; i < max(len(x), len(y)); i++ {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i >= len(x):
					*out = append(*out, Difference{p, absent, text(y[i])})
				case i >= len(y):
					*out = append(*out, Difference{p, text(x[i]), absent})
				default:
					diffValues(p, x[i], y[i], out)
				}
			}
			return
		}
	}
	if ta, tb := text(a), text(b); ta != tb {
		*out = append(*out, Difference{path, ta, tb})
	}
}

// text is the compact JSON of v.
func text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

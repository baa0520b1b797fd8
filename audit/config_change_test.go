package audit

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

// TestConfigChangeNamesEveryKnob: an engine.configured that changes any one knob is explained by that knob's
// change, and the timeline's summary of the config tells the two configs apart: a change of a knob either left
// out (wait methods, job limits) read "config change: none", as if nothing had been recorded.
func TestConfigChangeNamesEveryKnob(t *testing.T) {
	from := projections.DefaultConfig()
	typ := reflect.TypeOf(from)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Position" { // where the config was recorded, not a knob
			continue
		}
		to := from
		v := reflect.ValueOf(&to).Elem().Field(i)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 7)
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"m"}))
		default:
			t.Fatalf("%s: a knob of kind %s the test does not change", f.Name, v.Kind())
		}
		require.NotEqual(t, "none", configChange(from, to), f.Name)
		require.NotEqual(t, ConfigSummary(from), ConfigSummary(to), f.Name)
	}
}

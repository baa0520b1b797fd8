package commands

import (
	"fmt"
	"reflect"

	"github.com/crewlog/crewlog/events"
)

// importedTextProblem says which free text of p, an imported payload given as a pointer or a struct, is longer than
// crewlog's own command that records it takes (events.ImportedTexts); "" when none is. NB: refused, not cut: the
// importer cuts what its source holds, marking the cut, and a write that still carries more is one no importer of
// crewlog's sends.
func importedTextProblem(p any) string {
	if v := reflect.ValueOf(p); v.IsValid() && v.Kind() != reflect.Pointer {
		ptr := reflect.New(v.Type()) // NB: a copy: the caller's payload is not changed
		ptr.Elem().Set(v)
		p = ptr.Interface()
	}
	for _, f := range events.ImportedTexts(p) {
		if longerThan(*f.Text, f.Max) {
			return fmt.Sprintf("%s must be at most %d chars", f.Name, f.Max)
		}
	}
	return ""
}

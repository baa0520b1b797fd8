package commands

import (
	"fmt"
	"math"

	"github.com/crewlog/crewlog/events"
)

// importedForeignProblem says what makes p, a foreign.imported given as a pointer or a struct, one no importer
// records: a seq below 1, which no event of the source's log has (pi-crew's metadata.seq counts from 1, and the
// importers skip a line without one); "" when there is nothing, or when p is another payload. NB: events.since gives
// the seq back as metadata.imported.seq, where a pi-crew client reads its own event back.
func importedForeignProblem(p any) string {
	if f := payloadAs[events.ForeignImported](p); f != nil && f.Seq < 1 {
		return fmt.Sprintf("seq %d is not 1..%d (the source's metadata.seq)", f.Seq, int64(math.MaxInt64))
	}
	return ""
}

package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// BenchmarkListPage: the server's time and memory for one page of 100 items of about 4 KiB each (messages with
// characters JSON escapes), the page's bytes measured against maxPageBytes and written. Run with -benchmem.
func BenchmarkListPage(b *testing.B) {
	f := newFixture(b, Options{})
	body := strings.Repeat("a <b> & \u2028 ", 4096/16)
	for i := range 100 {
		r := f.do(audittest.Orchestrator, &commands.MessageSend{RunID: liveRun, To: []string{"01_lead"},
			Body: fmt.Sprint(i, body)})
		require.Nil(b, r.Rejected, "%v", r.Rejected)
	}
	h := f.srv.Handler()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/runs/"+liveRun+"/mailbox?taskId=01_lead&limit=100", nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Body.Len() < 100*4096 {
			b.Fatalf("%d, %d bytes", rec.Code, rec.Body.Len())
		}
	}
}

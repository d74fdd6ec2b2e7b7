package api

import (
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// A plant's CSV export — ';' between cells, decimal commas, local times —
// is read over the API with the same options as the CLI's.
func TestPlantCSVUpload(t *testing.T) {
	e := newEnv(t, Options{})
	csv := "Zeit;Temp\n2026-11-03 06:00:00;215,5\n"
	q := "/api/v1/ingest/csv?line=plant&product=p&recipe=r&run=p1&timeCol=Zeit&tz=Europe/Berlin&delimiter=%3B&decimalComma=true"
	e.want(e.do("engineer", "POST", q, strings.NewReader(csv)), 200, "")
	var page core.Page
	e.want(e.do("engineer", "GET", "/api/v1/ts?node=Temp", nil), 200, "").json(t, &page)
	want := time.Date(2026, 11, 3, 5, 0, 0, 0, time.UTC).UnixMilli()
	if len(page.Points) != 1 || page.Points[0].TsUs != want*1000 || page.Points[0].Value != 215.5 {
		t.Fatalf("stored %+v, want 215.5 at %d", page.Points, want)
	}
	// Without the zone the same file is refused, saying what is missing.
	r := e.do("engineer", "POST", strings.NewReplacer("&tz=Europe/Berlin", "", "run=p1", "run=p2").Replace(q), strings.NewReader(csv))
	if b := e.want(r, 422, core.CodeIngestInvalid).errBody(t); !strings.Contains(b.Message, "needs --tz") {
		t.Fatalf("message %q", b.Message)
	}
}

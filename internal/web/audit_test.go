package web

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
)

var (
	auditSeqRe    = regexp.MustCompile(`<tr data-seq="(\d+)">`)
	auditActionRe = regexp.MustCompile(`<tr data-seq="\d+"><td class="n">\d+</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>`)
	olderRe       = regexp.MustCompile(`href="([^"]*)" id="audit-older"`)
)

func auditSeqs(page string) []int64 {
	var out []int64
	for _, m := range auditSeqRe.FindAllStringSubmatch(page, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

func TestAuditPage(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	c := f.client(t, "victor")
	ctx := context.Background()
	head, _, err := f.store.AuditLog().Head(ctx)
	if err != nil || head < 6 {
		t.Fatalf("head %d %v", head, err)
	}

	// Newest first, a page of 3, then the older pages by their link.
	code, body, _ := get(t, c, base+"/ui/audit?limit=3")
	if code != http.StatusOK {
		t.Fatalf("audit %d: %s", code, excerpt(body))
	}
	if got := auditSeqs(body); len(got) != 3 || got[0] != head || got[1] != head-1 || got[2] != head-2 {
		t.Fatalf("first page seqs %v, want %d, %d, %d", got, head, head-1, head-2)
	}
	m := olderRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no link to older entries")
	}
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	code, body, _ = get(t, c, base+"/ui/audit"+next)
	if got := auditSeqs(body); code != http.StatusOK || len(got) != 3 || got[0] != head-3 {
		t.Fatalf("second page (%s) %d: seqs %v, want from %d", next, code, got, head-3)
	}
	if !strings.Contains(body, `id="audit-newest"`) {
		t.Error("an older page has no link back to the newest entries")
	}

	// Filters: the action prefix and the actor, kept on the older link.
	code, body, _ = get(t, c, base+"/ui/audit?"+url.Values{"action": {"cert.*"}, "limit": {"1"}}.Encode())
	if code != http.StatusOK {
		t.Fatalf("action filter %d: %s", code, excerpt(body))
	}
	rows := auditActionRe.FindAllStringSubmatch(body, -1)
	if len(rows) != 1 || !strings.HasPrefix(rows[0][2], "cert.") {
		t.Fatalf("cert.* rows %v", rows)
	}
	if m := olderRe.FindStringSubmatch(body); m == nil || !strings.Contains(m[1], "action=cert.%2A") {
		t.Errorf("older link %v does not keep the filter", m)
	}
	actor := rows[0][1]
	_, body, _ = get(t, c, base+"/ui/audit?"+url.Values{"actor": {actor}}.Encode())
	for _, r := range auditActionRe.FindAllStringSubmatch(body, -1) {
		if r[1] != actor {
			t.Fatalf("actor filter %q shows a row by %q", actor, r[1])
		}
	}

	// A time range: the entries within it only, checked against the log.
	all, err := f.store.AuditLog().Query(ctx, audit.Query{Newest: true, Limit: 10})
	if err != nil || len(all) < 6 {
		t.Fatalf("log %d %v", len(all), err)
	}
	to := all[1].At.Truncate(time.Second).Add(time.Second)
	from := all[len(all)-1].At.Truncate(time.Second)
	want, err := f.store.AuditLog().Query(ctx, audit.Query{Newest: true, FromMs: ptr(from.UnixMilli()), ToMs: ptr(to.UnixMilli()), Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ = get(t, c, base+"/ui/audit?"+url.Values{"from": {from.UTC().Format("2006-01-02T15:04:05")}, "to": {to.UTC().Format(time.RFC3339)}, "limit": {"200"}}.Encode())
	got := auditSeqs(body)
	if code != http.StatusOK || len(got) != len(want) || len(got) == 0 || got[0] != want[0].Seq {
		t.Errorf("time range %s..%s: %d, %d rows from %v, want %d", from, to, code, len(got), got, len(want))
	}

	// Bad filters are the application's errors, with their field.
	for q, field := range map[string]string{"from=yesterday": "from", "limit=0": "limit", "before=x": "before",
		"from=2026-01-02T00:00&to=2026-01-01T00:00": "to"} {
		code, body, _ := get(t, c, base+"/ui/audit?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, field) {
			t.Errorf("%s: %d %s", q, code, excerpt(body))
		}
	}

	// A principal of another line sees none of this line's entries.
	_, body, _ = get(t, f.client(t, "olga"), base+"/ui/audit?limit=200")
	if strings.Contains(body, "line-injection-01") {
		t.Error("the audit page shows another line's entries to a scoped principal")
	}
}

func ptr[T any](v T) *T { return &v }

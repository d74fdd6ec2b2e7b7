package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

func TestRoleTable(t *testing.T) {
	yes := map[Role][]Action{
		RoleViewer:   {ActRead},
		RoleEngineer: {ActRead, ActIngest, ActDataset, ActJob, ActTrial, ActCertRequest, ActModelStage},
		RoleApprover: {ActRead, ActCertApprove, ActPromoteProduction, ActModelStage, ActSceneFreeze, ActWrite},
		RoleAgent:    {ActRead, ActIngest, ActDataset, ActJob, ActTrial, ActCertRequest},
		RoleAdmin:    Actions,
	}
	for role, acts := range yes {
		ok := map[Action]bool{}
		for _, a := range acts {
			ok[a] = true
		}
		for _, a := range Actions {
			if got := RoleAllows(role, a); got != ok[a] {
				t.Errorf("%s %s: allowed=%v, want %v", role, a, got, ok[a])
			}
		}
	}
	// The agent's hard limits, named once more on their own.
	for _, a := range []Action{ActCertApprove, ActPromoteProduction, ActSceneFreeze, ActWrite, ActAdmin} {
		if RoleAllows(RoleAgent, a) {
			t.Errorf("agent may %s", a)
		}
	}
	if RoleAllows("root", ActRead) || RoleAllows(RoleAdmin, "unknown") {
		t.Error("unknown roles or actions must fail closed")
	}
}

func TestAllowLineScope(t *testing.T) {
	p := Principal{Name: "eve", Role: RoleEngineer, Lines: []string{"L1"}}
	cases := []struct {
		a     Action
		line  string
		field string
	}{
		{ActTrial, "L1", ""},
		{ActTrial, "", ""},
		{ActTrial, "L2", "lineId"},
		{ActCertApprove, "L1", "role"},
	}
	for _, c := range cases {
		err := p.Allow(c.a, c.line)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s %s: %v", c.a, c.line, err)
			}
			continue
		}
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != c.field || StatusOf(err) != 403 {
			t.Errorf("%s %s: got %v, want AML_FORBIDDEN field %s", c.a, c.line, err, c.field)
		}
	}
	if !(Principal{Role: RoleViewer}).InScope("anything") {
		t.Error("empty scope must be every line")
	}
}

func TestAllowEveryLine(t *testing.T) {
	cases := []struct {
		p     Principal
		field string
	}{
		{Principal{Name: "vic", Role: RoleViewer}, ""},
		{Principal{Name: "root", Role: RoleAdmin}, ""},
		{Principal{Name: "sam", Role: RoleViewer, Lines: []string{"L1"}}, "lineId"},
		{Principal{Name: "root1", Role: RoleAdmin, Lines: []string{"L1", "L2"}}, "lineId"},
		{Principal{Name: "x", Role: "root"}, "role"},
	}
	for _, c := range cases {
		err := c.p.AllowEveryLine(ActRead)
		if c.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.p, err)
			}
			continue
		}
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != c.field {
			t.Errorf("%+v: got %v, want AML_FORBIDDEN field %s", c.p, err, c.field)
		}
	}
}

func openTokens(t *testing.T) (*Tokens, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return NewTokens(st.SQL()), st
}

func TestTokensLifecycle(t *testing.T) {
	ctx := context.Background()
	tk, st := openTokens(t)
	now := time.UnixMilli(1_700_000_000_000)
	tk.SetClock(func() time.Time { return now })

	info, secret, err := tk.Create(ctx, "root", NewToken{Name: "alice", Role: RoleEngineer, Lines: []string{"L1", " L1", "L2", ""}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Lines) != 2 || info.Lines[0] != "L1" || info.Lines[1] != "L2" {
		t.Fatalf("lines %v", info.Lines)
	}
	p, err := tk.VerifyToken(ctx, secret)
	if err != nil || p.Name != "alice" || p.Role != RoleEngineer || p.TokenID != info.ID || len(p.Lines) != 2 {
		t.Fatalf("verify: %+v %v", p, err)
	}
	// Only the hash is stored.
	var n int
	if err := st.ReadDB().QueryRow(`SELECT count(*) FROM api_tokens WHERE hash=? AND lines NOT LIKE ?`, HashToken(secret), "%"+secret+"%").Scan(&n); err != nil || n != 1 {
		t.Fatalf("stored hash: %d %v", n, err)
	}
	if err := st.ReadDB().QueryRow(`SELECT count(*) FROM api_tokens WHERE hash=?`, secret).Scan(&n); err != nil || n != 0 {
		t.Fatal("secret stored in clear")
	}

	_, short, err := tk.Create(ctx, "root", NewToken{Name: "bot", Role: RoleAgent, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := tk.VerifyToken(ctx, short); err != nil || p.Lines != nil {
		t.Fatalf("agent token: %+v %v", p, err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := tk.VerifyToken(ctx, short); core.CodeOf(err) != CodeUnauthenticated || StatusOf(err) != 401 {
		t.Fatalf("expired token: %v", err)
	}

	if _, err := tk.Revoke(ctx, "root", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.VerifyToken(ctx, secret); core.CodeOf(err) != CodeUnauthenticated {
		t.Fatalf("revoked token: %v", err)
	}
	if _, err := tk.Revoke(ctx, "root", info.ID); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := tk.Revoke(ctx, "root", "tok_nope"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unknown revoke: %v", err)
	}
	for _, bad := range []string{"", "aml_nope", "Bearer x", secret + "x"} {
		if _, err := tk.VerifyToken(ctx, bad); core.CodeOf(err) != CodeUnauthenticated {
			t.Errorf("token %q: %v", bad, err)
		}
	}

	list, err := tk.List(ctx)
	if err != nil || len(list) != 2 || list[0].RevokedAt == nil || list[0].RevokedBy != "root" || list[1].Active(now) {
		t.Fatalf("list: %+v %v", list, err)
	}
	got, err := tk.Get(ctx, info.ID)
	if err != nil || got.Name != "alice" {
		t.Fatalf("get: %+v %v", got, err)
	}

	// create, create, revoke are audited and the chain verifies.
	log := audit.New(st.SQL())
	es, err := log.List(ctx, 0, 10, "")
	if err != nil || len(es) != 3 || es[0].Action != AuditTokenCreate || es[2].Action != AuditTokenRevoke || es[2].Subject != info.ID || es[0].Actor != "root" {
		t.Fatalf("audit: %+v %v", es, err)
	}
	if v, err := log.Verify(ctx); err != nil || !v.OK {
		t.Fatalf("audit verify: %+v %v", v, err)
	}
}

func TestCreateInvalid(t *testing.T) {
	tk, _ := openTokens(t)
	cases := []struct {
		name  string
		n     NewToken
		field string
	}{
		{"no name", NewToken{Role: RoleViewer}, "name"},
		{"bad role", NewToken{Name: "x", Role: "root"}, "role"},
		{"negative ttl", NewToken{Name: "x", Role: RoleViewer, TTL: -time.Second}, "ttl"},
	}
	for _, c := range cases {
		_, _, err := tk.Create(context.Background(), "root", c.n)
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != c.field {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestMiddleware(t *testing.T) {
	tk, _ := openTokens(t)
	_, secret, err := tk.Create(context.Background(), "root", NewToken{Name: "vera", Role: RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := FromContext(r.Context())
		if !ok {
			t.Error("no principal")
		}
		w.Write([]byte(p.Name))
	})
	cases := []struct {
		name   string
		dev    bool
		remote string
		header string
		cookie string
		status int
		body   string
	}{
		{"bearer", false, "10.0.0.1:5", "Bearer " + secret, "", 200, "vera"},
		{"cookie", false, "10.0.0.1:5", "", secret, 200, "vera"},
		{"missing", false, "127.0.0.1:5", "", "", 401, ""},
		{"bad scheme", false, "127.0.0.1:5", "Basic abc", "", 401, ""},
		{"unknown token", true, "127.0.0.1:5", "Bearer aml_zzz", "", 401, ""},
		{"dev loopback", true, "127.0.0.1:5", "", "", 200, "dev"},
		{"dev ipv6 loopback", true, "[::1]:5", "", "", 200, "dev"},
		{"dev remote", true, "10.0.0.1:5", "", "", 401, ""},
		{"dev with token", true, "127.0.0.1:5", "Bearer " + secret, "", 200, "vera"},
	}
	for _, c := range cases {
		h := Middleware(tk, c.dev)(echo)
		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = c.remote
		r.Host = "localhost:8080" // dev mode accepts only this server's names
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if c.cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, w.Code, c.status, w.Body)
			continue
		}
		if c.status == 200 {
			if w.Body.String() != c.body {
				t.Errorf("%s: principal %q", c.name, w.Body)
			}
			continue
		}
		var b ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Code != CodeUnauthenticated || b.Field != "token" || b.Message == "" {
			t.Errorf("%s: body %s", c.name, w.Body)
		}
	}
}

// TestAllowNamesNoForeignLine: the line-scope refusal does not name the
// refused line (most often the line of a stored object named by id).
func TestAllowNamesNoForeignLine(t *testing.T) {
	p := Principal{Name: "eve", Role: RoleEngineer, Lines: []string{"L1"}}
	err := p.Allow(ActRead, "secret-line")
	if err == nil || strings.Contains(err.Error(), "secret-line") || !strings.Contains(err.Error(), "L1") {
		t.Fatalf("%v: want a refusal naming eve's lines only", err)
	}
}

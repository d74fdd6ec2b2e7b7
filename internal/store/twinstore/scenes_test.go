package twinstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
)

func testScene(id, version string, at time.Time) *contract.SceneContract {
	c := contract.DefaultInjectionScene()
	c.SceneID, c.SceneVersion, c.CreatedAt, c.CreatedBy = id, version, at, "alice"
	return c
}

func sceneHash(t *testing.T, c *contract.SceneContract) string {
	t.Helper()
	h, err := c.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestScenePutGetList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		a1 := testScene("scene-a", "1.0.0", t0)
		if err := s.PutScene(ctx, a1); err != nil {
			t.Fatal(err)
		}
		a2 := testScene("scene-a", "1.1.0", t0.Add(time.Hour))
		if err := s.PutScene(ctx, a2); err != nil {
			t.Fatal(err)
		}
		b := testScene("scene-b", "1.0.0", t0)
		b.LineID = "other-line"
		if err := s.PutScene(ctx, b); err != nil {
			t.Fatal(err)
		}

		got, err := s.GetScene(ctx, "scene-a", "1.0.0")
		if err != nil || sceneHash(t, got) != sceneHash(t, a1) || got.Status != contract.SceneDraft {
			t.Fatalf("get 1.0.0: %v %+v", err, got)
		}
		latest, err := s.GetScene(ctx, "scene-a", "")
		if err != nil || latest.SceneVersion != "1.1.0" {
			t.Fatalf("latest: %v %+v", err, latest)
		}
		if _, err := s.GetScene(ctx, "scene-a", "9.9.9"); core.CodeOf(err) != core.CodeNotFound {
			t.Fatalf("missing version: %v", err)
		}
		if _, err := s.GetScene(ctx, "nope", ""); core.CodeOf(err) != core.CodeNotFound {
			t.Fatalf("missing scene: %v", err)
		}

		all, err := s.ListScenes(ctx, "")
		if err != nil || len(all) != 3 {
			t.Fatalf("list all: %v %d", err, len(all))
		}
		line, err := s.ListScenes(ctx, a1.LineID)
		if err != nil || len(line) != 2 || line[0].SceneVersion != "1.0.0" || line[1].SceneVersion != "1.1.0" {
			t.Fatalf("list line: %v %d", err, len(line))
		}

		// Replacing a draft changes it.
		a1.PhysicsProfileID = "other-profile"
		if err := s.PutScene(ctx, a1); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GetScene(ctx, "scene-a", "1.0.0")
		if got.PhysicsProfileID != "other-profile" {
			t.Fatalf("draft not replaced: %+v", got)
		}

		// Invalid contracts are refused.
		bad := testScene("scene-c", "1.0.0", t0)
		bad.Controls = nil
		if err := s.PutScene(ctx, bad); core.CodeOf(err) != contract.CodeContractInvalid {
			t.Fatalf("invalid: %v", err)
		}
	})
}

func TestSceneFrozenImmutable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		c := testScene("scene-a", "1.0.0", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		if err := s.PutScene(ctx, c); err != nil {
			t.Fatal(err)
		}
		h := sceneHash(t, c)
		fz, err := s.FreezeScene(ctx, "scene-a", "1.0.0", "bob", h)
		if err != nil || fz.Status != contract.SceneFrozen || fz.FrozenBy != "bob" {
			t.Fatalf("freeze: %v %+v", err, fz)
		}
		got, err := s.GetScene(ctx, "scene-a", "1.0.0")
		if err != nil || got.Status != contract.SceneFrozen || sceneHash(t, got) != h || got.FrozenAt.IsZero() {
			t.Fatalf("get frozen: %v %+v", err, got)
		}

		c.PhysicsProfileID = "changed"
		if err := s.PutScene(ctx, c); core.CodeOf(err) != contract.CodeSceneFrozen {
			t.Fatalf("put over frozen: %v", err)
		}
		// Putting a contract that is itself frozen is refused too.
		if err := s.PutScene(ctx, got); core.CodeOf(err) != contract.CodeSceneFrozen {
			t.Fatalf("put frozen contract: %v", err)
		}
		if _, err := s.FreezeScene(ctx, "scene-a", "1.0.0", "bob", h); core.CodeOf(err) != contract.CodeSceneFrozen {
			t.Fatalf("refreeze: %v", err)
		}
		// SQL-level trigger.
		if _, err := s.SQL().ExecContext(ctx, `UPDATE scenes SET hash=? WHERE scene_id='scene-a'`, h); !sqldb.IsConstraint(err) {
			t.Fatalf("trigger did not refuse an update of a frozen scene: %v", err)
		}
		again, _ := s.GetScene(ctx, "scene-a", "1.0.0")
		if again.PhysicsProfileID == "changed" || sceneHash(t, again) != h {
			t.Fatalf("frozen scene changed: %+v", again)
		}
		if _, err := s.FreezeScene(ctx, "nope", "1.0.0", "bob", h); core.CodeOf(err) != core.CodeNotFound {
			t.Fatalf("freeze missing: %v", err)
		}
	})
}

func TestSceneFreezeStaleHash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		c := testScene("scene-a", "1.0.0", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		if err := s.PutScene(ctx, c); err != nil {
			t.Fatal(err)
		}
		reviewed := sceneHash(t, c)
		c.PhysicsProfileID = "changed-after-review"
		if err := s.PutScene(ctx, c); err != nil {
			t.Fatal(err)
		}
		l := audit.New(s.SQL())
		before, _ := l.Verify(ctx)
		if _, err := s.FreezeScene(ctx, "scene-a", "1.0.0", "bob", reviewed); core.CodeOf(err) != core.CodeConflict {
			t.Fatalf("stale hash: %v", err)
		}
		got, err := s.GetScene(ctx, "scene-a", "1.0.0")
		if err != nil || got.Status != contract.SceneDraft || got.FrozenBy != "" || sceneHash(t, got) != sceneHash(t, c) {
			t.Fatalf("scene changed by a failed freeze: %v %+v", err, got)
		}
		after, _ := l.Verify(ctx)
		if after.Entries != before.Entries {
			t.Fatalf("failed freeze was audited: %d → %d entries", before.Entries, after.Entries)
		}
		if _, err := s.FreezeScene(ctx, "scene-a", "1.0.0", "", sceneHash(t, c)); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("no approver: %v", err)
		}
	})
}

func TestSceneFreezeRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		c := testScene("scene-a", "1.0.0", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		if err := s.PutScene(ctx, c); err != nil {
			t.Fatal(err)
		}
		h := sceneHash(t, c)
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = s.FreezeScene(ctx, "scene-a", "1.0.0", "approver", h)
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch code := core.CodeOf(err); code {
			case "":
				wins++
			case contract.CodeSceneFrozen, core.CodeConflict:
			default:
				t.Errorf("unexpected error %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d freezes won, want exactly 1: %v", wins, errs)
		}
		es, err := audit.New(s.SQL()).List(ctx, 0, 0, twinstore.SceneSubject("scene-a", "1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		freezes := 0
		for _, e := range es {
			if e.Action == twinstore.AuditSceneFreeze {
				freezes++
			}
		}
		if freezes != 1 {
			t.Fatalf("%d freeze audit entries, want 1", freezes)
		}
	})
}

func TestSceneAudit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		c := testScene("scene-a", "1.0.0", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		if err := s.PutScene(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := s.PutScene(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FreezeScene(ctx, "scene-a", "1.0.0", "bob", sceneHash(t, c)); err != nil {
			t.Fatal(err)
		}
		c.PhysicsProfileID = "x"
		_ = s.PutScene(ctx, c) // refused: must not be audited
		l := audit.New(s.SQL())
		es, err := l.List(ctx, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ action, actor string }{{twinstore.AuditScenePut, "alice"}, {twinstore.AuditScenePut, "alice"}, {twinstore.AuditSceneFreeze, "bob"}}
		if len(es) != len(want) {
			t.Fatalf("%d audit entries, want %d: %+v", len(es), len(want), es)
		}
		for i, w := range want {
			if es[i].Action != w.action || es[i].Actor != w.actor || es[i].Subject != "scene-a@1.0.0" || es[i].LineID != c.LineID {
				t.Fatalf("entry %d: %+v", i, es[i])
			}
		}
		res, err := l.Verify(ctx)
		if err != nil || !res.OK || res.Entries != 3 {
			t.Fatalf("verify: %v %+v", err, res)
		}
	})
}

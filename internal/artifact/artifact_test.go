package artifact

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgPool gives the test a pool on an empty schema of AML_TEST_PG
// (pgtest: skipped without a server outside CI, failed in CI). The pool
// closes before the schema is dropped (cleanups run last-in first-out).
func pgPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// backends returns a store writing into root for each implementation.
func backends() map[string]func(t *testing.T, root string) Store {
	return map[string]func(*testing.T, string) Store{
		"local": func(t *testing.T, root string) Store { return Local{Root: root} },
		"postgres": func(t *testing.T, root string) Store {
			pool := pgPool(t)
			s, err := NewPostgres(context.Background(), pool, root)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// writeTree makes a directory with a nested file, an empty file and a file
// of several chunks.
func writeTree(t *testing.T, dir string) {
	t.Helper()
	big := make([]byte, 2*ChunkSize+123)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for name, b := range map[string][]byte{"model.json": []byte(`{"kind":"mean"}`), "arrays/x.f32": big, "empty": nil, "arrays/sub/y.txt": []byte("y\n")} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if core.CodeOf(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"datasets/ds-1", true}, {"jobs/job-1/artifacts", true},
		{"", false}, {"/abs", false}, {"../up", false}, {"a/../b", false}, {"a//b", false}, {".", false}, {"a\\b", false}, {".tmp-art-1", false},
	} {
		if err := CheckKey(tc.key); (err == nil) != tc.ok {
			t.Errorf("CheckKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
	}
}

// TestPutFetch: what one machine puts, another (an empty data directory)
// fetches with the same bytes and tree hash; re-put is a no-op; other
// content under the same key is a conflict; unknown keys are not found.
func TestPutFetch(t *testing.T) {
	for name, mk := range backends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			src := t.TempDir()
			writeTree(t, src)
			rootA, rootB := t.TempDir(), t.TempDir()
			a := mk(t, rootA)
			tr, err := a.Put(ctx, "jobs/job-1/artifacts", src)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Put(ctx, "jobs/job-1/artifacts", src); err != nil {
				t.Fatalf("re-put: %v", err)
			}
			other := t.TempDir()
			if err := os.WriteFile(filepath.Join(other, "model.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = a.Put(ctx, "jobs/job-1/artifacts", other)
			wantCode(t, err, core.CodeConflict)
			// A second handle on another machine's data directory.
			b := a
			if pg, ok := a.(*Postgres); ok {
				b, _ = NewPostgres(ctx, pg.pool, rootB)
			} else {
				b = Local{Root: rootB}
				if _, err := b.Put(ctx, "jobs/job-1/artifacts", filepath.Join(rootA, "jobs/job-1/artifacts")); err != nil {
					t.Fatal(err)
				}
			}
			dir, err := b.Fetch(ctx, "jobs/job-1/artifacts", tr.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Scan(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.SHA256 != tr.SHA256 || got.Bytes != tr.Bytes || len(got.Files) != 4 {
				t.Fatalf("fetched %+v, put %+v", got, tr)
			}
			x1, _ := os.ReadFile(filepath.Join(src, "arrays/x.f32"))
			x2, _ := os.ReadFile(filepath.Join(dir, "arrays/x.f32"))
			if !bytes.Equal(x1, x2) {
				t.Fatal("multi-chunk file differs after fetch")
			}
			st, err := b.Stat(ctx, "jobs/job-1/artifacts")
			if err != nil || st.SHA256 != tr.SHA256 {
				t.Fatalf("stat %+v %v", st, err)
			}
			_, err = b.Fetch(ctx, "jobs/job-1/artifacts", "00"+tr.SHA256[2:])
			wantCode(t, err, CodeTampered)
			_, err = b.Fetch(ctx, "jobs/none", "")
			wantCode(t, err, core.CodeNotFound)
			_, err = b.Fetch(ctx, "../x", "")
			wantCode(t, err, core.CodeInvalidArgument)
			if err := b.Delete(ctx, "jobs/job-1/artifacts"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Stat(ctx, "jobs/job-1/artifacts"); core.CodeOf(err) != core.CodeNotFound {
				t.Fatalf("after delete: %v", err)
			}
		})
	}
}

// TestPostgresTamper: every way of editing the stored bytes is detected
// on read with AML_ARTIFACT_TAMPERED, and nothing is left at the key's
// path; a damaged local copy is replaced by the verified stored one.
func TestPostgresTamper(t *testing.T) {
	pool := pgPool(t)
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src)
	for _, tc := range []struct {
		name string
		sql  string
	}{
		{"chunk bytes", `UPDATE artifact_chunks SET data = overlay(data placing '\x00'::bytea from 10 for 1) WHERE octet_length(data) = 123`},
		{"chunk missing", `DELETE FROM artifact_chunks WHERE octet_length(data) = 2`},
		{"blob missing", `DELETE FROM artifact_blobs WHERE bytes = 2`},
		{"tree file list", `UPDATE artifact_trees SET files = jsonb_set(files, '{0,sha256}', '"00"')`},
		{"tree hash", `UPDATE artifact_trees SET sha256 = repeat('0', 64)`},
		{"blob size", `UPDATE artifact_blobs SET bytes = bytes + 1 WHERE bytes = 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// NewPostgres creates the tables; then they are emptied.
			s, err := NewPostgres(ctx, pool, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{`DELETE FROM artifact_trees`, `DELETE FROM artifact_blobs`, `DELETE FROM artifact_chunks`} {
				if _, err := pool.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Put(ctx, "datasets/ds-1", src); err != nil {
				t.Fatal(err)
			}
			tag, err := pool.Exec(ctx, tc.sql)
			if err != nil || tag.RowsAffected() == 0 {
				t.Fatalf("tamper: %v (%d rows)", err, tag.RowsAffected())
			}
			_, err = s.Fetch(ctx, "datasets/ds-1", "")
			wantCode(t, err, CodeTampered)
			if _, serr := os.Stat(filepath.Join(s.Root, "datasets/ds-1")); serr == nil {
				t.Fatal("a tampered artifact was materialised")
			}
		})
	}
	t.Run("damaged local copy", func(t *testing.T) {
		s, err := NewPostgres(ctx, pool, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`DELETE FROM artifact_trees`, `DELETE FROM artifact_blobs`, `DELETE FROM artifact_chunks`} {
			if _, err := pool.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		tr, err := s.Put(ctx, "datasets/ds-2", src)
		if err != nil {
			t.Fatal(err)
		}
		dir, err := s.Fetch(ctx, "datasets/ds-2", tr.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "model.json"), []byte("edited"), 0o644); err != nil {
			t.Fatal(err)
		}
		if dir, err = s.Fetch(ctx, "datasets/ds-2", tr.SHA256); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "model.json")); string(b) != `{"kind":"mean"}` {
			t.Fatalf("local copy not restored: %q", b)
		}
	})
}

// TestPostgresDedup: identical content under two keys is stored once.
func TestPostgresDedup(t *testing.T) {
	pool := pgPool(t)
	ctx := context.Background()
	s, err := NewPostgres(ctx, pool, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src)
	for _, k := range []string{"datasets/a", "datasets/b"} {
		if _, err := s.Put(ctx, k, src); err != nil {
			t.Fatal(err)
		}
	}
	var chunks, blobs int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM artifact_chunks), (SELECT count(*) FROM artifact_blobs)`).Scan(&chunks, &blobs); err != nil {
		t.Fatal(err)
	}
	// x.f32 is 3 chunks of which the first two are equal (its byte
	// pattern repeats every 256 bytes): 2 stored; model.json and y.txt one
	// each; the empty file none.
	if chunks != 4 || blobs != 4 {
		t.Fatalf("chunks %d blobs %d, want 4 and 4", chunks, blobs)
	}
}

// TestLocalTamper: the local store verifies a wanted hash by rescanning.
func TestLocalTamper(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	writeTree(t, filepath.Join(root, "datasets/ds-1"))
	l := Local{Root: root}
	tr, err := l.Put(ctx, "datasets/ds-1", filepath.Join(root, "datasets/ds-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "datasets/ds-1/empty"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = l.Fetch(ctx, "datasets/ds-1", tr.SHA256)
	wantCode(t, err, CodeTampered)
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "datasets/ds-1/link")); err == nil {
		_, err = Scan(filepath.Join(root, "datasets/ds-1"))
		wantCode(t, err, core.CodeInvalidArgument)
	}
}

// TestPostgresConcurrentFetch: jobs of one worker (and workers sharing a
// data directory) fetch the same dataset at once; all get the verified copy.
func TestPostgresConcurrentFetch(t *testing.T) {
	pool := pgPool(t)
	ctx := context.Background()
	root := t.TempDir()
	src := t.TempDir()
	writeTree(t, src)
	s1, err := NewPostgres(ctx, pool, root)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewPostgres(ctx, pool, root) // another process, same directory
	tr, err := s1.Put(ctx, "datasets/ds-c", src)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		s := s1
		if i%2 == 1 {
			s = s2
		}
		go func() {
			_, err := s.Fetch(ctx, "datasets/ds-c", tr.SHA256)
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresCollect: chunks and blobs of deleted trees are collected,
// shared ones stay while any tree references them, a live tree still
// fetches, and a Put in progress (holding the lock shared) makes Collect
// wait until its tree is recorded.
func TestPostgresCollect(t *testing.T) {
	pool := pgPool(t)
	ctx := context.Background()
	s, err := NewPostgres(ctx, pool, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src)
	own := t.TempDir()
	if err := os.WriteFile(filepath.Join(own, "only-b.bin"), bytes.Repeat([]byte{7}, 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, dir := range map[string]string{"datasets/a": src, "datasets/b": own} {
		if _, err := s.Put(ctx, k, dir); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (chunks, blobs int) {
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM artifact_chunks), (SELECT count(*) FROM artifact_blobs)`).Scan(&chunks, &blobs); err != nil {
			t.Fatal(err)
		}
		return
	}
	if c, err := s.Collect(ctx); err != nil || c.Blobs != 0 || c.Chunks != 0 {
		t.Fatalf("nothing to collect: %+v %v", c, err)
	}
	if err := s.Delete(ctx, "datasets/b"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Collect(ctx)
	if err != nil || c.Blobs != 1 || c.Chunks != 1 || c.Bytes != 3000 {
		t.Fatalf("after deleting b: %+v %v, want 1 blob, 1 chunk, 3000 bytes", c, err)
	}
	if ch, bl := count(); ch != 4 || bl != 4 {
		t.Fatalf("a's chunks/blobs: %d %d, want 4 4", ch, bl)
	}
	if _, err := s.Fetch(ctx, "datasets/a", ""); err != nil {
		t.Fatalf("live tree after collect: %v", err)
	}

	// A Put in progress holds the lock shared: Collect waits for it.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, int64(gcLock)); err != nil {
		t.Fatal(err)
	}
	done := make(chan Collected, 1)
	go func() {
		c, err := s.Collect(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	select {
	case <-done:
		t.Fatal("Collect ran while a Put held the lock")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock_shared($1)`, int64(gcLock)); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Collect did not run after the lock was released")
	}

	if err := s.Delete(ctx, "datasets/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if ch, bl := count(); ch != 0 || bl != 0 {
		t.Fatalf("after deleting every tree: %d chunks %d blobs left", ch, bl)
	}
}

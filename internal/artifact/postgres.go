package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/aml-project/aml/internal/core"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ChunkSize is the size of a stored chunk (the last chunk of a file is
// shorter).
const ChunkSize = 1 << 20

// schema is created (idempotently) by NewPostgres. The tables live in the
// connection's search_path, next to the store's.
const schema = `
CREATE TABLE IF NOT EXISTS artifact_chunks (
	sha256 text PRIMARY KEY,
	data   bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS artifact_blobs (
	sha256 text PRIMARY KEY,
	bytes  bigint NOT NULL,
	chunks text[] NOT NULL
);
CREATE TABLE IF NOT EXISTS artifact_trees (
	key        text PRIMARY KEY,
	sha256     text NOT NULL,
	bytes      bigint NOT NULL,
	files      jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);`

// schemaLock serialises schema creation across processes (CREATE TABLE IF
// NOT EXISTS races on the catalog otherwise).
const schemaLock = `SELECT pg_advisory_xact_lock(7419305521)`

// Postgres keeps artifacts in PostgreSQL and materialises them under Root
// (the local data directory) on Fetch.
type Postgres struct {
	pool *pgxpool.Pool
	Root string

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per key: one download at a time in a process
}

func (p *Postgres) keyLock(key string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.locks == nil {
		p.locks = map[string]*sync.Mutex{}
	}
	l, ok := p.locks[key]
	if !ok {
		l = &sync.Mutex{}
		p.locks[key] = l
	}
	return l
}

var _ Store = (*Postgres)(nil)

// NewPostgres creates the artifact tables if needed. root is the local
// data directory that fetched artifacts are written to.
func NewPostgres(ctx context.Context, pool *pgxpool.Pool, root string) (*Postgres, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "artifact store: begin")
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, schemaLock); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "artifact store: lock")
	}
	if _, err := tx.Exec(ctx, schema); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "artifact store: create tables")
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "artifact store: commit")
	}
	return &Postgres{pool: pool, Root: root}, nil
}

func (p *Postgres) dir(key string) string { return filepath.Join(p.Root, filepath.FromSlash(key)) }

// gcLock is the advisory lock between Put (shared, for its whole upload)
// and Collect (exclusive): a chunk or blob uploaded by a Put whose tree row
// is not written yet references nothing, and Collect must not take it.
const gcLock = 7419305522

// Put uploads the files under dir that the database does not hold yet
// (by sha256), then records the tree. It holds the collector's lock shared
// while it runs (Collect waits for it, it waits for a running Collect).
func (p *Postgres) Put(ctx context.Context, key, dir string) (Tree, error) {
	if err := CheckKey(key); err != nil {
		return Tree{}, err
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return Tree{}, core.Wrap(core.CodeStoreUnavailable, err, "artifact store: connect")
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, int64(gcLock)); err != nil {
		return Tree{}, core.Wrap(core.CodeStoreUnavailable, err, "artifact store: lock")
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock_shared($1)`, int64(gcLock)); err != nil {
			// A lock left on a pooled connection would outlive this Put:
			// close the connection (its session's locks go with it) so
			// that Release destroys it instead of pooling it.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return p.put(ctx, key, dir)
}

func (p *Postgres) put(ctx context.Context, key, dir string) (Tree, error) {
	t, err := Scan(dir)
	if err != nil {
		return Tree{}, err
	}
	t.Key = key
	if cur, err := p.Stat(ctx, key); err == nil {
		return t, sameTree(key, cur, t)
	} else if core.CodeOf(err) != core.CodeNotFound {
		return Tree{}, err
	}
	for _, f := range t.Files {
		if err := p.putFile(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return Tree{}, err
		}
	}
	files, _ := json.Marshal(t.Files)
	tag, err := p.pool.Exec(ctx, `INSERT INTO artifact_trees (key, sha256, bytes, files) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING`,
		key, t.SHA256, t.Bytes, files)
	if err != nil {
		return Tree{}, core.Wrap(core.CodeStoreUnavailable, err, "record artifact %s", key)
	}
	if tag.RowsAffected() == 0 { // another process put the key first
		cur, err := p.Stat(ctx, key)
		if err != nil {
			return Tree{}, err
		}
		return t, sameTree(key, cur, t)
	}
	return t, nil
}

func sameTree(key string, cur, t Tree) error {
	if cur.SHA256 != t.SHA256 {
		return core.FieldErrorf(core.CodeConflict, "key", "artifact %s already exists with other content (tree %.12s, not %.12s)", key, cur.SHA256, t.SHA256)
	}
	return nil
}

// putFile stores one file's chunks and its blob row unless the blob exists.
func (p *Postgres) putFile(ctx context.Context, path string, f File) error {
	var one int
	err := p.pool.QueryRow(ctx, `SELECT 1 FROM artifact_blobs WHERE sha256 = $1`, f.SHA256).Scan(&one)
	if err == nil {
		return nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return core.Wrap(core.CodeStoreUnavailable, err, "look up blob of %s", f.Path)
	}
	in, err := os.Open(path)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "open %s", f.Path)
	}
	defer in.Close()
	buf := make([]byte, ChunkSize)
	whole := sha256.New()
	var chunks []string
	var n int64
	for {
		k, rerr := io.ReadFull(in, buf)
		if k > 0 {
			sum := sha256.Sum256(buf[:k])
			h := hex.EncodeToString(sum[:])
			if _, err := p.pool.Exec(ctx, `INSERT INTO artifact_chunks (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, h, buf[:k]); err != nil {
				return core.Wrap(core.CodeStoreUnavailable, err, "store chunk of %s", f.Path)
			}
			chunks = append(chunks, h)
			whole.Write(buf[:k])
			n += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return core.Wrap(core.CodeInternal, rerr, "read %s", f.Path)
		}
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != f.SHA256 || n != f.Bytes {
		return core.FieldErrorf(core.CodeConflict, f.Path, "file changed while it was being stored")
	}
	if chunks == nil {
		chunks = []string{}
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO artifact_blobs (sha256, bytes, chunks) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING`, f.SHA256, f.Bytes, chunks); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "store blob of %s", f.Path)
	}
	return nil
}

// Stat reads key's tree row and checks that its hash matches its file list.
func (p *Postgres) Stat(ctx context.Context, key string) (Tree, error) {
	if err := CheckKey(key); err != nil {
		return Tree{}, err
	}
	t := Tree{Key: key}
	var files []byte
	err := p.pool.QueryRow(ctx, `SELECT sha256, bytes, files FROM artifact_trees WHERE key = $1`, key).Scan(&t.SHA256, &t.Bytes, &files)
	if errors.Is(err, pgx.ErrNoRows) {
		return Tree{}, core.FieldErrorf(core.CodeNotFound, "key", "artifact %s not found", key)
	} else if err != nil {
		return Tree{}, core.Wrap(core.CodeStoreUnavailable, err, "read artifact %s", key)
	}
	if err := json.Unmarshal(files, &t.Files); err != nil {
		return Tree{}, tampered(key, "file list is not valid: %v", err)
	}
	var total int64
	for i, f := range t.Files {
		if CheckKey(f.Path) != nil || (i > 0 && t.Files[i-1].Path >= f.Path) {
			return Tree{}, tampered(key, "file list entry %q is not a clean, sorted relative path", f.Path)
		}
		total += f.Bytes
	}
	if got := TreeHash(t.Files); got != t.SHA256 || total != t.Bytes {
		return Tree{}, tampered(key, "tree hash %.12s of the recorded files is not the recorded %.12s", got, t.SHA256)
	}
	return t, nil
}

// Fetch materialises key under Root (reusing a local copy whose tree is
// the stored one) and verifies every chunk, file and the tree.
func (p *Postgres) Fetch(ctx context.Context, key, want string) (string, error) {
	t, err := p.Stat(ctx, key)
	if err != nil {
		return "", err
	}
	if want != "" && t.SHA256 != want {
		return "", tampered(key, "stored tree hash %.12s, expected %.12s", t.SHA256, want)
	}
	// Jobs of one worker fetch the same dataset at once: one downloads,
	// the others then find the verified copy.
	l := p.keyLock(key)
	l.Lock()
	defer l.Unlock()
	dst := p.dir(key)
	if cur, err := Scan(dst); err == nil && cur.SHA256 == t.SHA256 {
		return dst, nil
	}
	tmp, err := tempBeside(dst)
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp) // best effort: the failure is what is returned
		}
	}()
	for _, f := range t.Files {
		if err := p.getFile(ctx, f, filepath.Join(tmp, filepath.FromSlash(f.Path))); err != nil {
			return "", err
		}
	}
	// A stale or damaged local copy is replaced by the verified one;
	// another process sharing Root may have just put a good one there.
	if cur, err := Scan(dst); err == nil && cur.SHA256 == t.SHA256 {
		return dst, nil
	}
	if _, err := os.Lstat(dst); err == nil {
		old, err := tempBeside(dst)
		if err != nil {
			return "", err
		}
		_ = os.Remove(old) // only a free name is wanted: the Rename reports a failure
		if err := os.Rename(dst, old); err != nil {
			return "", core.Wrap(core.CodeInternal, err, "move aside stale copy of %s", key)
		}
		defer func() { _ = os.RemoveAll(old) }() // best effort: the stale copy is garbage either way
	}
	if err := os.Rename(tmp, dst); err != nil {
		if cur, serr := Scan(dst); serr == nil && cur.SHA256 == t.SHA256 {
			return dst, nil // another process won the race with the same content
		}
		return "", core.Wrap(core.CodeInternal, err, "rename artifact %s into place", key)
	}
	ok = true
	return dst, nil
}

func (p *Postgres) getFile(ctx context.Context, f File, to string) error {
	var size int64
	var chunks []string
	err := p.pool.QueryRow(ctx, `SELECT bytes, chunks FROM artifact_blobs WHERE sha256 = $1`, f.SHA256).Scan(&size, &chunks)
	if errors.Is(err, pgx.ErrNoRows) {
		return tampered(f.Path, "content %.12s is missing from the store", f.SHA256)
	} else if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "read blob of %s", f.Path)
	}
	if size != f.Bytes {
		return tampered(f.Path, "stored size %d, tree says %d", size, f.Bytes)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return core.Wrap(core.CodeInternal, err, "create dir")
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "create %s", f.Path)
	}
	defer out.Close()
	rows, err := p.pool.Query(ctx, `SELECT u.sha, c.data FROM unnest($1::text[]) WITH ORDINALITY AS u(sha, ord)
		LEFT JOIN artifact_chunks c ON c.sha256 = u.sha ORDER BY u.ord`, chunks)
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "read chunks of %s", f.Path)
	}
	defer rows.Close()
	whole := sha256.New()
	var n int64
	i := 0
	for rows.Next() {
		var want string
		var data []byte
		if err := rows.Scan(&want, &data); err != nil {
			return core.Wrap(core.CodeStoreUnavailable, err, "read chunk of %s", f.Path)
		}
		if data == nil {
			return tampered(f.Path, "chunk %d (%.12s) is missing from the store", i, want)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
			return tampered(f.Path, "chunk %d does not match its sha256 %.12s", i, want)
		}
		if _, err := out.Write(data); err != nil {
			return core.Wrap(core.CodeInternal, err, "write %s", f.Path)
		}
		whole.Write(data)
		n += int64(len(data))
		i++
	}
	if err := rows.Err(); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "read chunks of %s", f.Path)
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != f.SHA256 || n != f.Bytes {
		return tampered(f.Path, "content sha256 %.12s (%d bytes), tree says %.12s (%d bytes)", got, n, f.SHA256, f.Bytes)
	}
	if err := out.Close(); err != nil {
		return core.Wrap(core.CodeInternal, err, "close %s", f.Path)
	}
	return nil
}

// Delete removes key's tree row. Chunks are kept (another tree, or a Put
// in progress, may share them), and so is a local copy under Root: it is
// the caller's file (a job replacing an earlier try's artifact deletes the
// key and puts the new files from that very directory).
func (p *Postgres) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM artifact_trees WHERE key = $1`, key); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "delete artifact %s", key)
	}
	return nil
}

// Collected is what Collect removed.
type Collected struct {
	Blobs  int64 `json:"blobs"`
	Chunks int64 `json:"chunks"`
	Bytes  int64 `json:"bytes"` // chunk bytes freed
}

// Collect deletes the blobs no tree references and the chunks no blob
// references — what deleted datasets and pruned models leave behind
// (Delete removes only the tree row, because chunks are shared by
// content). It takes the collector's lock exclusively, so it waits for
// every Put in progress (whose chunks are not referenced yet) and Puts
// wait for it. A Fetch of a live tree is never affected; a Fetch racing
// the deletion of its own key may fail with AML_NOT_FOUND.
func (p *Postgres) Collect(ctx context.Context) (Collected, error) {
	var c Collected
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return c, core.Wrap(core.CodeStoreUnavailable, err, "artifact collect: begin")
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(gcLock)); err != nil {
		return c, core.Wrap(core.CodeStoreUnavailable, err, "artifact collect: lock")
	}
	tag, err := tx.Exec(ctx, `DELETE FROM artifact_blobs b WHERE NOT EXISTS (
		SELECT 1 FROM artifact_trees t, jsonb_array_elements(t.files) f WHERE f->>'sha256' = b.sha256)`)
	if err != nil {
		return c, core.Wrap(core.CodeStoreUnavailable, err, "artifact collect: blobs")
	}
	c.Blobs = tag.RowsAffected()
	err = tx.QueryRow(ctx, `WITH gone AS (
		DELETE FROM artifact_chunks c WHERE NOT EXISTS (
			SELECT 1 FROM (SELECT unnest(chunks) AS h FROM artifact_blobs) r WHERE r.h = c.sha256)
		RETURNING length(data) AS n)
		SELECT count(*), coalesce(sum(n), 0) FROM gone`).Scan(&c.Chunks, &c.Bytes)
	if err != nil {
		return c, core.Wrap(core.CodeStoreUnavailable, err, "artifact collect: chunks")
	}
	if err := tx.Commit(ctx); err != nil {
		return c, core.Wrap(core.CodeStoreUnavailable, err, "artifact collect: commit")
	}
	return c, nil
}

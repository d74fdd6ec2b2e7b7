// Package migration reads a store's embedded schema steps. The SQLite and
// PostgreSQL stores keep their own SQL (the dialects differ) but number,
// name and checksum their files the same way, so the schema parity test
// can compare them step by step; this package is that shared part.
package migration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema step: file NNNN_name.sql.
type Migration struct {
	Version  int
	Name     string
	SQL      string
	Checksum string // hex sha256 of the file
}

// Load returns the migrations in dir of fsys in version order. Files must
// be named NNNN_name.sql and numbered 1..n without gaps.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration file %q is not NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration file %q: %v", name, err)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations must be numbered 1..n without gaps; found %d at position %d", m.Version, i+1)
		}
	}
	return out, nil
}

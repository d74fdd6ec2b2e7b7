package postgres

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/store/sqlite"
)

// TestSchemaParity migrates an empty SQLite file and an empty PostgreSQL
// schema with their embedded migrations and compares the result: the same
// migration versions and names, the same tables, the same column names.
func TestSchemaParity(t *testing.T) {
	ctx := context.Background()
	sqMs, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	pgMs, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(sqMs) != len(pgMs) {
		t.Fatalf("SQLite has %d migrations, PostgreSQL %d: add internal/store/postgres/migrations/%04d_*.sql (the PostgreSQL form of SQLite's)", len(sqMs), len(pgMs), len(pgMs)+1)
	}
	for i := range sqMs {
		if sqMs[i].Name != pgMs[i].Name {
			t.Errorf("migration %d is %q on SQLite but %q on PostgreSQL", i+1, sqMs[i].Name, pgMs[i].Name)
		}
	}

	full := sqliteSchema(t, sqMs)

	s, _ := openTest(t)
	rows, err := s.pool.Query(ctx, `SELECT c.relname, a.attname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attname <> 'rowid'`)
	if err != nil {
		t.Fatal(err)
	}
	pg := map[string][]string{}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		pg[table] = append(pg[table], col)
	}
	rows.Close()
	for table := range pg {
		sort.Strings(pg[table])
	}

	for table, cols := range full {
		got, ok := pg[table]
		if !ok {
			t.Errorf("table %s exists on SQLite but not on PostgreSQL", table)
			continue
		}
		if !slices.Equal(cols, got) {
			t.Errorf("table %s columns differ:\n  sqlite:   %s\n  postgres: %s", table, strings.Join(cols, ","), strings.Join(got, ","))
		}
	}
	for table := range pg {
		if _, ok := full[table]; !ok {
			t.Errorf("table %s exists on PostgreSQL but not on SQLite", table)
		}
	}
}

// sqliteSchema migrates a new SQLite file with ms and returns table →
// sorted column names.
func sqliteSchema(t *testing.T, ms []sqlite.Migration) map[string][]string {
	t.Helper()
	st, err := sqlite.OpenWith(t.TempDir(), sqlite.Options{Migrations: ms})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	db := st.ReadDB()
	rows, err := db.Query(`SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], col)
	}
	for table := range out {
		sort.Strings(out[table])
	}
	return out
}

package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/storetest"
)

// TestConformance runs the back-end-independent store suite (the same one
// internal/store/postgres runs) against a real SQLite file per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) core.Store {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			})
			return s
		},
		Again: func(t *testing.T, s core.Store) core.Store {
			s2, err := Open(filepath.Dir(s.(*Store).Path()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s2.Close(); err != nil {
					t.Error(err)
				}
			})
			return s2
		},
	})
}

package migration

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_two.sql": {Data: []byte("B")},
		"m/0001_one.sql": {Data: []byte("A")},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "one" || ms[1].SQL != "B" ||
		ms[0].Checksum != "559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd" {
		t.Fatalf("%+v", ms)
	}
	for _, c := range []struct {
		fs   fstest.MapFS
		want string
	}{
		{fstest.MapFS{"m/0001_a.sql": {}, "m/0003_c.sql": {}}, "without gaps"},
		{fstest.MapFS{"m/x.sql": {}}, "NNNN_name.sql"},
		{fstest.MapFS{"m/0001_a.txt": {}}, "NNNN_name.sql"},
		{fstest.MapFS{"m/one_a.sql": {}}, "one_a.sql"},
	} {
		if _, err := Load(c.fs, "m"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.fs, err, c.want)
		}
	}
}

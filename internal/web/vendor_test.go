package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"testing"
)

// uPlotVersion is the vendored uPlot (npm pack uplot@1.6.32: dist/uPlot.iife.min.js,
// dist/uPlot.min.css and LICENSE, unchanged).
const uPlotVersion = "1.6.32"

// vendored pins every file under static/vendor/ to its sha256: a changed
// or added file must come with a new pin (and, for a new version, the
// files of that npm package, unchanged).
var vendored = map[string]string{
	"vendor/uplot/LICENSE":           "8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd",
	"vendor/uplot/uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
	"vendor/uplot/uPlot.min.css":     "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
}

func TestVendoredChecksums(t *testing.T) {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = fs.WalkDir(sub, "vendor", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		seen[path] = true
		b, err := fs.ReadFile(sub, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		want, ok := vendored[path]
		switch {
		case !ok:
			t.Errorf("%s is vendored but has no pinned checksum", path)
		case hex.EncodeToString(sum[:]) != want:
			t.Errorf("%s: sha256 %x, pinned %s", path, sum, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range vendored {
		if !seen[p] {
			t.Errorf("%s is pinned but not embedded", p)
		}
	}
	lic, err := fs.ReadFile(sub, "vendor/uplot/LICENSE")
	if err != nil || !strings.Contains(string(lic), "MIT License") {
		t.Errorf("uPlot's licence is not embedded: %v", err)
	}
	js, err := fs.ReadFile(sub, "vendor/uplot/uPlot.iife.min.js")
	if err != nil || !strings.Contains(string(js), "var uPlot=") {
		t.Errorf("uPlot %s's browser bundle is not embedded: %v", uPlotVersion, err)
	}
	// Served by the UI, like every static asset.
	if _, err := fs.Stat(sub, "chart.js"); err != nil {
		t.Error(err)
	}
}

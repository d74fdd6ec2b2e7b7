package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
)

// VerifyResult is what Verify checked.
type VerifyResult struct {
	ID        string   `json:"id"`
	SHA256    string   `json:"sha256"`
	Artifacts int      `json:"artifacts"`
	Bytes     int64    `json:"bytes"`
	OK        bool     `json:"ok"`
	Problems  []string `json:"problems,omitempty"`
}

// Verify recomputes a registered dataset's hash from its files and compares
// it with the registry. Any difference — a changed, missing or extra file, an
// edited manifest or spec — is AML_DATASET_TAMPERED naming the first file
// found wrong; the result lists every problem.
func Verify(dataDir string, d core.Dataset) (VerifyResult, error) {
	res := VerifyResult{ID: d.ID, SHA256: d.SHA256}
	dir := filepath.Join(dataDir, filepath.FromSlash(d.Path))
	var problems []core.Problem
	bad := func(field, format string, args ...any) {
		p := core.Problem{Field: field, Message: sprintf(format, args...)}
		problems = append(problems, p)
		res.Problems = append(res.Problems, field+": "+p.Message)
	}
	mb, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		bad("manifest.json", "cannot read: %v", err)
		return res, tampered(d.ID, problems)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(mb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		bad("manifest.json", "not a valid manifest: %v", err)
		return res, tampered(d.ID, problems)
	}
	listed := map[string]bool{"manifest.json": true}
	for _, a := range m.Artifacts {
		if !safeName(a.Name) {
			bad("manifest.json", "artifact name %q escapes the dataset directory", a.Name)
			continue
		}
		listed[a.Name] = true
		sum, n, err := fileSHA(filepath.Join(dir, filepath.FromSlash(a.Name)))
		switch {
		case err != nil:
			bad(a.Name, "cannot read: %v", err)
		case n != a.Bytes:
			bad(a.Name, "size %d bytes, manifest says %d", n, a.Bytes)
		case sum != a.SHA256:
			bad(a.Name, "sha256 %s, manifest says %s", sum[:12], a.SHA256[:min(12, len(a.SHA256))])
		}
		res.Bytes += n
		res.Artifacts++
	}
	// Files nobody listed do not belong to a dataset. The walk's errors
	// are problems too (the callback never stops it), so its result says
	// nothing more.
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if err != nil {
			bad(rel, "cannot read: %v", err)
			return nil
		}
		if e.IsDir() {
			return nil
		}
		if !listed[rel] {
			bad(rel, "file is not listed in the manifest")
		}
		return nil
	})
	// The spec file must be the registered spec.
	if sb, err := os.ReadFile(filepath.Join(dir, "spec.json")); err == nil && !bytes.Equal(bytes.TrimSpace(sb), []byte(d.SpecJSON)) {
		bad("spec.json", "differs from the registered spec")
	}
	manSHA := sha256hex(mb)
	res.Bytes += int64(len(mb))
	if got := DatasetHash([]byte(d.SpecJSON), m.Artifacts, manSHA); got != d.SHA256 && len(problems) == 0 {
		bad("manifest.json", "dataset hash %s does not match the registered %s", got[:12], d.SHA256[:12])
	}
	if len(problems) > 0 {
		return res, tampered(d.ID, problems)
	}
	res.OK = true
	return res, nil
}

func tampered(id string, problems []core.Problem) error {
	e := core.Invalid(core.CodeDatasetTampered, problems)
	e.Message = "dataset " + id + " failed verification: " + e.Message
	return e
}

// IsTampered reports whether err is a failed verification.
func IsTampered(err error) bool {
	var ae *core.Error
	return errors.As(err, &ae) && ae.Code == core.CodeDatasetTampered
}

// LoadManifest reads a registered dataset's manifest.
func LoadManifest(dataDir string, d core.Dataset) (*Manifest, error) {
	var m Manifest
	if err := loadJSON(filepath.Join(dataDir, filepath.FromSlash(d.Path), "manifest.json"), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// LoadReport reads a registered dataset's report.
func LoadReport(dataDir string, d core.Dataset) (*Report, error) {
	var r Report
	if err := loadJSON(filepath.Join(dataDir, filepath.FromSlash(d.Path), "report.json"), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func loadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return core.Wrap(core.CodeDatasetTampered, err, "read %s", filepath.Base(path))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return core.Wrap(core.CodeDatasetTampered, err, "decode %s", filepath.Base(path))
	}
	return nil
}

// Delete unregisters a dataset (refused with AML_IN_USE while a job or model
// references it) and then removes its files.
func Delete(ctx context.Context, reg core.Datasets, dataDir, id string) error {
	d, err := reg.GetDataset(ctx, id)
	if err != nil {
		return err
	}
	if err := reg.DeleteDataset(ctx, id); err != nil {
		return err
	}
	if shared, err := artifact.For(ctx, reg, dataDir); err != nil {
		return core.Wrap(core.CodeOf(err), err, "remove shared files of dataset %s (it is unregistered)", id)
	} else if shared != nil {
		if err := shared.Delete(ctx, d.Path); err != nil {
			return core.Wrap(core.CodeOf(err), err, "remove shared files of dataset %s (it is unregistered)", id)
		}
	}
	if err := os.RemoveAll(filepath.Join(dataDir, filepath.FromSlash(d.Path))); err != nil {
		return core.Wrap(core.CodeInternal, err, "remove files of dataset %s (it is unregistered)", id)
	}
	return nil
}

// Materialise makes dataset d's files present under dataDir: fetched from
// the back-end's shared artifact store (PostgreSQL; chunks verified on
// read) or, on SQLite, the local files as they are. st is the store d came
// from. Verify and the loaders then read the local copy.
func Materialise(ctx context.Context, st any, dataDir string, d core.Dataset) error {
	_, err := artifact.Materialise(ctx, st, dataDir, d.Path)
	return err
}

// FetchManifest is LoadManifest of a dataset whose files may live in the
// back-end's shared artifact store (Materialise first).
func FetchManifest(ctx context.Context, st any, dataDir string, d core.Dataset) (*Manifest, error) {
	if err := Materialise(ctx, st, dataDir, d); err != nil {
		return nil, err
	}
	return LoadManifest(dataDir, d)
}

// FetchReport is LoadReport after Materialise.
func FetchReport(ctx context.Context, st any, dataDir string, d core.Dataset) (*Report, error) {
	if err := Materialise(ctx, st, dataDir, d); err != nil {
		return nil, err
	}
	return LoadReport(dataDir, d)
}

// FetchVerify is Verify after Materialise: on PostgreSQL it checks the
// fetched copy (chunks were verified on read; Verify re-hashes the files
// against the dataset's recorded sha256).
func FetchVerify(ctx context.Context, st any, dataDir string, d core.Dataset) (VerifyResult, error) {
	if err := Materialise(ctx, st, dataDir, d); err != nil {
		return VerifyResult{}, err
	}
	return Verify(dataDir, d)
}

package model

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/aml-project/aml/internal/safefile"
)

// ArtifactHash is a model artifact's content identity: sha256 over every
// regular file under dir, in sorted order of their '/'-separated paths
// relative to dir (byte-wise string order), of
//
//	path + "\n" + sha256hex(file bytes) + "\n"
//
// for each file. Directories contribute only through their files (an empty
// directory changes nothing); file modes and times are not covered.
// Changing, adding, removing or renaming any file changes the hash.
// Symbolic links (dir itself included) and other non-regular files are
// refused with AML_MODEL_INVALID, so the hash always covers what a
// predictor reads. An empty directory hashes to sha256("").
func ArtifactHash(dir string) (string, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		e := invalid("artifact", "cannot read %s: %v", dir, err)
		e.Err = err
		return "", e
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return "", invalid("artifact", "%s is a symbolic link; model artifacts may not contain links", dir)
	}
	if !st.IsDir() {
		return "", invalid("artifact", "%s is not a directory", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := e.Type(); {
		case t&fs.ModeSymlink != 0:
			return invalid("artifact", "%s is a symbolic link; model artifacts may not contain links", rel)
		case t.IsDir():
			return nil
		case !t.IsRegular():
			return invalid("artifact", "%s is not a regular file", rel)
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		if IsModelInvalid(err) {
			return "", err
		}
		e := invalid("artifact", "cannot read %s: %v", dir, err)
		e.Err = err
		return "", e
	}
	sort.Strings(files)
	h := sha256.New()
	for _, rel := range files {
		sum, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			e := invalid("artifact", "cannot read %s: %v", rel, err)
			e.Err = err
			return "", e
		}
		io.WriteString(h, rel+"\n"+sum+"\n")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileSHA256(path string) (string, error) {
	// Regular files only, no link followed, no FIFO waited on: the walk
	// checked the types, the trainer could have swapped a file since.
	f, err := safefile.OpenRegular(path, true)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

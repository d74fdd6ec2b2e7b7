package envlease

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/aml-project/aml/internal/core"
)

// Config describes one trainer environment.
type Config struct {
	// Name identifies the environment; it is used in file names, so it must
	// match [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
	Name string `json:"name"`
	// Dir is the environment's directory (a venv, say). A relative Dir is
	// relative to the data directory; empty means <dataDir>/envs/<name>.
	Dir string `json:"dir"`
	// Rebuild is the argv of the rebuild command, run with Dir as its
	// working directory (Dir is created first if missing).
	Rebuild []string `json:"rebuild"`
	// Description is free text for humans.
	Description string `json:"description,omitempty"`
}

// ConfigFile is the name, inside the data directory, of the file listing the
// environments (a JSON array of Config).
const ConfigFile = "envs.json"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// defaultConfigs is used when envs.json is absent: one "python" venv.
func defaultConfigs(dataDir string) []Config {
	dir := filepath.Join(dataDir, "envs", "python")
	return []Config{{
		Name:        "python",
		Dir:         dir,
		Rebuild:     []string{"python3", "-m", "venv", "--clear", dir},
		Description: "default Python virtual environment for external trainers",
	}}
}

// loadConfigs reads <dataDir>/envs.json. It reports every problem at once
// (AML_INVALID_ARGUMENT with one problem per field).
func loadConfigs(dataDir string) ([]Config, error) {
	path := filepath.Join(dataDir, ConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return defaultConfigs(dataDir), nil
	}
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "read %s", path)
	}
	var cfgs []Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfgs); err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, path, "not a JSON array of {name, dir, rebuild, description}: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, path, "trailing data after the JSON array")
	}
	var probs []core.Problem
	seen := map[string]bool{}
	for i := range cfgs {
		c := &cfgs[i]
		f := fmt.Sprintf("%s[%d]", ConfigFile, i)
		switch {
		case !nameRE.MatchString(c.Name):
			probs = append(probs, core.Problem{Field: f + ".name", Message: fmt.Sprintf("%q must match %s", c.Name, nameRE)})
		case seen[c.Name]:
			probs = append(probs, core.Problem{Field: f + ".name", Message: fmt.Sprintf("duplicate environment %q", c.Name)})
		}
		seen[c.Name] = true
		if len(c.Rebuild) == 0 || c.Rebuild[0] == "" {
			probs = append(probs, core.Problem{Field: f + ".rebuild", Message: "must be a non-empty argv, e.g. [\"python3\", \"-m\", \"venv\", \"--clear\", \"DIR\"]"})
		}
		if c.Dir == "" {
			c.Dir = filepath.Join(dataDir, "envs", c.Name)
		} else if !filepath.IsAbs(c.Dir) {
			c.Dir = filepath.Join(dataDir, c.Dir)
		}
		c.Dir = filepath.Clean(c.Dir)
	}
	if e := core.Invalid(core.CodeInvalidArgument, probs); e != nil {
		return nil, e
	}
	return cfgs, nil
}

package opcua

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/guard"
)

// LineConfig is one line's governed writer: the OPC UA server its
// setpoints are written to, the map naming the OPC UA node of each AML
// node, the session's security, and the period a step test samples the
// line at.
type LineConfig struct {
	Line     string
	Endpoint string
	Map      *Map
	Security Security
	// Sample is a step test's sampling period on this line (default 1s).
	Sample time.Duration
}

// DefaultSample is a step test's sampling period when the line's
// configuration names none.
const DefaultSample = time.Second

// DialTimeout bounds opening a line's writer.
const DialTimeout = 30 * time.Second

// MaxLineWriters bounds a line-writers file.
const MaxLineWriters = 1000

// lineWritersFile is the line-writers file (aml serve --line-writers):
//
//	{"lines": [{"line": "tank-line", "endpoint": "opc.tcp://10.0.0.5:4840", "map": "tank-map.json",
//	            "securityPolicy": "Basic256Sha256", "securityMode": "SignAndEncrypt",
//	            "user": "aml", "passwordEnv": "AML_TANK_OPCUA_PASSWORD", "cert": "client.pem", "key": "client.key",
//	            "sample": "1s"}]}
//
// map, cert and key are files on the server, relative to the
// line-writers file's directory; the map is the one aml connect opcua
// reads, and its line must be the entry's.
type lineWritersFile struct {
	Lines []lineEntry `json:"lines"`
}

type lineEntry struct {
	Line           string `json:"line"`
	Endpoint       string `json:"endpoint"`
	Map            string `json:"map"`
	SecurityPolicy string `json:"securityPolicy,omitempty"`
	SecurityMode   string `json:"securityMode,omitempty"`
	User           string `json:"user,omitempty"`
	PasswordEnv    string `json:"passwordEnv,omitempty"`
	Cert           string `json:"cert,omitempty"`
	Key            string `json:"key,omitempty"`
	Sample         string `json:"sample,omitempty"`
}

// ParseLineWriters parses a line-writers file (see lineWritersFile):
// readFile reads a map file named by the file (relative names are the
// caller's to resolve), getenv reads a password's variable. Every problem
// is reported (AML_INVALID_ARGUMENT with Problems); unknown fields are
// errors.
func ParseLineWriters(data []byte, readFile func(name string) ([]byte, error), getenv func(string) string) ([]LineConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f lineWritersFile
	if err := dec.Decode(&f); err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "lines", "line-writers file: %v", err)
	}
	if dec.More() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "lines", "line-writers file: trailing data after the JSON object")
	}
	var probs []core.Problem
	add := func(field, format string, args ...any) {
		probs = append(probs, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if len(f.Lines) == 0 {
		add("lines", "at least one line is required")
	}
	if len(f.Lines) > MaxLineWriters {
		add("lines", "at most %d lines, got %d", MaxLineWriters, len(f.Lines))
		f.Lines = f.Lines[:MaxLineWriters]
	}
	out := make([]LineConfig, 0, len(f.Lines))
	seen := map[string]bool{}
	for i, e := range f.Lines {
		fld := fmt.Sprintf("lines[%d]", i)
		c := LineConfig{Line: e.Line, Endpoint: e.Endpoint, Sample: DefaultSample,
			Security: Security{Policy: e.SecurityPolicy, Mode: e.SecurityMode, User: e.User, CertFile: e.Cert, KeyFile: e.Key}}
		if !amlID.MatchString(e.Line) {
			add(fld+".line", "must be 1..100 characters of [A-Za-z0-9._-] starting with a letter or digit, got %q", e.Line)
		} else if seen[e.Line] {
			add(fld+".line", "line %q has two writers", e.Line)
		}
		seen[e.Line] = true
		if len(e.Endpoint) < len("opc.tcp://x") || e.Endpoint[:len("opc.tcp://")] != "opc.tcp://" {
			add(fld+".endpoint", "must be an opc.tcp:// URL, got %q", e.Endpoint)
		}
		if e.Sample != "" {
			d, err := time.ParseDuration(e.Sample)
			if err != nil || d < 10*time.Millisecond || d > time.Hour {
				add(fld+".sample", "must be a duration of 10ms..1h, got %q", e.Sample)
			}
			c.Sample = d
		}
		if e.PasswordEnv != "" {
			c.Security.Password = getenv(e.PasswordEnv)
			if c.Security.Password == "" {
				add(fld+".passwordEnv", "environment variable %q is empty or unset", e.PasswordEnv)
			}
		}
		if e.Map == "" {
			add(fld+".map", "a map file is required")
		} else if raw, err := readFile(e.Map); err != nil {
			add(fld+".map", "%v", err)
		} else if m, err := ParseMap(raw); err != nil {
			add(fld+".map", "%s: %v", e.Map, err)
		} else if m.Line != e.Line {
			add(fld+".map", "%s maps line %q, not %q", e.Map, m.Line, e.Line)
		} else {
			c.Map = m
		}
		out = append(out, c)
	}
	if err := core.Invalid(core.CodeInvalidArgument, probs); err != nil {
		return nil, err
	}
	return out, nil
}

// LoadLineWriters reads the line-writers file at path (the server
// operator's, named on the server's command line) and returns its
// registry; map, certificate and key files are relative to path's
// directory. Nothing is dialled yet.
func LoadLineWriters(path string) (*LineWriters, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, core.Wrap(core.CodeInvalidArgument, err, "line-writers file")
	}
	dir := filepath.Dir(path)
	rel := func(name string) string {
		if name == "" || filepath.IsAbs(name) {
			return name
		}
		return filepath.Join(dir, name)
	}
	cfgs, err := ParseLineWriters(data, func(name string) ([]byte, error) { return os.ReadFile(rel(name)) }, os.Getenv)
	if err != nil {
		return nil, err
	}
	for i := range cfgs {
		cfgs[i].Security.CertFile, cfgs[i].Security.KeyFile = rel(cfgs[i].Security.CertFile), rel(cfgs[i].Security.KeyFile)
	}
	return NewLineWriters(cfgs...)
}

// LineWriters is a process's registry of governed OPC UA writers, one per
// configured line. A line's Writer is dialled on first use and kept open
// (safe for concurrent use) until Close. The configuration comes only
// from the process's operator (a file on the server, the local CLI's
// flags): no request names an endpoint, a map or a file.
type LineWriters struct {
	cfg map[string]LineConfig

	mu     sync.Mutex
	open   map[string]*Writer
	closed bool
	// dial opens a line's writer (DialWriter; tests count the dials).
	dial func(ctx context.Context, c LineConfig) (*Writer, error)
}

// NewLineWriters returns the registry of cfgs (one per line).
func NewLineWriters(cfgs ...LineConfig) (*LineWriters, error) {
	r := &LineWriters{cfg: map[string]LineConfig{}, open: map[string]*Writer{},
		dial: func(ctx context.Context, c LineConfig) (*Writer, error) {
			return DialWriter(ctx, c.Endpoint, c.Map, c.Security)
		}}
	for _, c := range cfgs {
		if c.Line == "" || c.Map == nil || c.Endpoint == "" {
			return nil, core.Errorf(core.CodeInvalidArgument, "line writer %q: line, endpoint and map are required", c.Line)
		}
		if _, dup := r.cfg[c.Line]; dup {
			return nil, core.Errorf(core.CodeInvalidArgument, "line %q has two writers", c.Line)
		}
		if c.Sample <= 0 {
			c.Sample = DefaultSample
		}
		r.cfg[c.Line] = c
	}
	return r, nil
}

// Lines lists the configured lines, sorted.
func (r *LineWriters) Lines() []string {
	out := make([]string, 0, len(r.cfg))
	for l := range r.cfg {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// SampleFor is a step test's sampling period on line (DefaultSample for
// a line without a writer).
func (r *LineWriters) SampleFor(line string) time.Duration {
	if c, ok := r.cfg[line]; ok {
		return c.Sample
	}
	return DefaultSample
}

// WriterFor returns line's governed writer, dialling it on first use; nil
// and no error when no writer is configured for line. A failed dial is
// AML_LINE_WRITER_UNAVAILABLE (nothing was written) and is retried on the
// next call.
func (r *LineWriters) WriterFor(ctx context.Context, line string) (guard.Writer, error) {
	c, ok := r.cfg[line]
	if !ok {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, core.Errorf(core.CodeLineWriterUnavailable, "line %s: the line writers are closed (the process is shutting down)", line)
	}
	if w := r.open[line]; w != nil {
		return w, nil
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	w, err := r.dial(dctx, c)
	if err != nil {
		return nil, &core.Error{Code: core.CodeLineWriterUnavailable, Message: fmt.Sprintf("line %s: open the governed writer at %s: %v", line, c.Endpoint, err), Err: err}
	}
	r.open[line] = w
	return w, nil
}

// Close closes every open writer; later WriterFor calls fail.
func (r *LineWriters) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for l, w := range r.open {
		if err := w.Close(); err != nil {
			errs = append(errs, fmt.Errorf("line %s: %w", l, err))
		}
		delete(r.open, l)
	}
	return errors.Join(errs...)
}

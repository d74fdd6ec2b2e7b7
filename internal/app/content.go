package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/trainer"
)

// Stored content a training job refers to instead of a server-side path:
// physics models (uploaded, validated, hashed) and external trainers (a
// program an admin registered). Security issue #16: a request used to
// name a file the server opened (param physics) and a program it ran
// (trainer exec:PATH).

var (
	opPhysicsPut  = Op{Name: "physics.put", Act: auth.ActJob, Summary: "Store a physics model (.aml source): validated, hashed; trainer params name it by id"}
	opPhysicsList = Op{Name: "physics.list", Act: auth.ActRead, Summary: "List stored physics models"}
	opPhysicsShow = Op{Name: "physics.show", Act: auth.ActRead, Summary: "A stored physics model with its source"}

	opTrainerRegister = Op{Name: "trainer.register", Act: auth.ActAdmin, Summary: "Register an external trainer program under a name (admin; audited); jobs name it ext:NAME"}
	opTrainerList     = Op{Name: "trainer.list", Act: auth.ActRead, Summary: "List the trainers: native ones (with their param names) and registered external ones"}
	opTrainerShow     = Op{Name: "trainer.show", Act: auth.ActRead, Summary: "A trainer: kind, model formats and the JSON schema of its params (native trainers)"}
)

func contentOps() []*Op {
	return []*Op{
		bind(&opPhysicsPut, (*App).PhysicsPut),
		bind(&opPhysicsList, (*App).PhysicsList),
		bind(&opPhysicsShow, (*App).PhysicsShow),
		bind(&opTrainerRegister, (*App).TrainerRegister),
		bind(&opTrainerList, (*App).TrainerList),
		bind(&opTrainerShow, (*App).TrainerShow),
	}
}

var physicsIDRe = regexp.MustCompile(`^phys-[0-9a-f]{24}$`)

// IsPhysicsID reports whether s has the form of a stored physics model id.
func IsPhysicsID(s string) bool { return physicsIDRe.MatchString(s) }

// PhysicsID is the id of the physics source with sha256 sum.
func PhysicsID(sum string) string { return core.PhysicsIDPrefix + sum[:24] }

func (a *App) physicsStore() (core.PhysicsModels, error) {
	if s, ok := a.d.Store.(core.PhysicsModels); ok {
		return s, nil
	}
	return nil, core.Errorf(core.CodeStoreUnavailable, "this store keeps no physics models")
}

func (a *App) trainerStore() (core.ExtTrainers, error) {
	if s, ok := a.d.Store.(core.ExtTrainers); ok {
		return s, nil
	}
	return nil, core.Errorf(core.CodeStoreUnavailable, "this store keeps no trainer registrations")
}

// PhysicsPutRequest is a physics model's source.
type PhysicsPutRequest struct {
	Source   string `json:"source" jsonschema:"the model's .aml source text (docs/physics-language.md; at most 1 MiB)"`
	FileName string `json:"fileName,omitempty" jsonschema:"a file name for positions in problems (default model.aml)"`
}

// Validate requires the source within the size limit.
func (r *PhysicsPutRequest) Validate() error {
	if err := required("source", r.Source); err != nil {
		return err
	}
	if len(r.Source) > physics.MaxSourceBytes {
		return core.FieldErrorf(core.CodeQuotaExceeded, "source", "the source is %d bytes; the limit is %d", len(r.Source), physics.MaxSourceBytes)
	}
	r.FileName = filepath.Base(filepath.Clean("/" + r.FileName))
	if r.FileName == "/" || r.FileName == "." {
		r.FileName = "model.aml"
	}
	return nil
}

// PhysicsPut validates and stores a physics model; storing the same source
// again returns the stored model.
func (a *App) PhysicsPut(ctx context.Context, p Principal, req PhysicsPutRequest) (core.PhysicsModel, error) {
	return run(ctx, a, p, &opPhysicsPut, req, func(ctx context.Context, p Principal, req PhysicsPutRequest) (core.PhysicsModel, error) {
		s, err := a.physicsStore()
		if err != nil {
			return core.PhysicsModel{}, err
		}
		// The problems quote the caller's own source, never a server file.
		pm, err := physics.Parse(req.FileName, []byte(req.Source))
		if err != nil {
			return core.PhysicsModel{}, err
		}
		sum := sha256.Sum256([]byte(req.Source))
		h := hex.EncodeToString(sum[:])
		m, err := s.PutPhysics(ctx, core.PhysicsModel{ID: PhysicsID(h), SHA256: h, Name: pm.Name, FileName: req.FileName, Source: req.Source, CreatedBy: p.Name})
		m.Source = ""
		return m, err
	})
}

// PhysicsListRequest takes no parameters.
type PhysicsListRequest struct{}

// PhysicsList lists the stored physics models (without their source).
func (a *App) PhysicsList(ctx context.Context, p Principal, req PhysicsListRequest) (List[core.PhysicsModel], error) {
	return run(ctx, a, p, &opPhysicsList, req, func(ctx context.Context, p Principal, _ PhysicsListRequest) (List[core.PhysicsModel], error) {
		s, err := a.physicsStore()
		if err != nil {
			return List[core.PhysicsModel]{}, err
		}
		ms, err := s.ListPhysics(ctx)
		if err != nil {
			return List[core.PhysicsModel]{}, err
		}
		return ListOf(ms), nil
	})
}

// PhysicsRequest names a stored physics model.
type PhysicsRequest struct {
	ID string `json:"id" jsonschema:"physics model id (phys-…)"`
}

// Validate requires the id.
func (r *PhysicsRequest) Validate() error { return required("id", r.ID) }

// PhysicsShow returns a stored physics model with its source.
func (a *App) PhysicsShow(ctx context.Context, p Principal, req PhysicsRequest) (core.PhysicsModel, error) {
	return run(ctx, a, p, &opPhysicsShow, req, func(ctx context.Context, p Principal, req PhysicsRequest) (core.PhysicsModel, error) {
		s, err := a.physicsStore()
		if err != nil {
			return core.PhysicsModel{}, err
		}
		return s.GetPhysics(ctx, req.ID)
	})
}

// checkPhysicsParam is the job-submit rule for a native trainer's physics
// parameter: it must name a stored physics model by id (and, when
// physicsSha256 is given, by that hash). A path is refused — the server
// never opens a file a request names. The answer is the params with
// physicsSha256 pinned to the stored model's hash.
func (a *App) checkPhysicsParam(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 {
		return params, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return params, nil // the runner reports malformed params
	}
	raw, ok := m["physics"]
	if !ok {
		return params, nil
	}
	var ref string
	if err := json.Unmarshal(raw, &ref); err != nil || ref == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "params.physics", "physics must be the id of a stored physics model (phys-…)")
	}
	if !IsPhysicsID(ref) {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "params.physics",
			"physics must be the id of a stored physics model (phys-…), not a file path: upload the model first (aml physics put FILE, op physics.put) and pass its id")
	}
	s, err := a.physicsStore()
	if err != nil {
		return nil, err
	}
	pm, err := s.GetPhysics(ctx, ref)
	if err != nil {
		return nil, err
	}
	if raw, ok := m["physicsSha256"]; ok {
		var want string
		if json.Unmarshal(raw, &want) != nil || !strings.EqualFold(want, pm.SHA256) {
			return nil, core.FieldErrorf(core.CodeConflict, "params.physicsSha256", "physics model %s has sha256 %s, not %s", pm.ID, pm.SHA256, string(raw))
		}
	}
	m["physicsSha256"], _ = json.Marshal(pm.SHA256)
	return json.Marshal(m)
}

// ---- external trainers

var trainerNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// TrainerRegisterRequest registers an external trainer.
type TrainerRegisterRequest struct {
	Name string   `json:"name" jsonschema:"the trainer's name (lower case letters, digits, _ . -); jobs name it ext:NAME"`
	Exec string   `json:"exec" jsonschema:"absolute path of the program on the workers (a *.py script runs with python3)"`
	Env  []string `json:"env,omitempty" jsonschema:"parent environment variables passed through to the program (e.g. VIRTUAL_ENV)"`
}

// Validate checks the name, the path's form and the variable names.
func (r *TrainerRegisterRequest) Validate() error {
	if err := firstErr(required("name", r.Name), required("exec", r.Exec)); err != nil {
		return err
	}
	if !trainerNameRe.MatchString(r.Name) {
		return core.FieldErrorf(core.CodeInvalidArgument, "name", "trainer name %q: use lower case letters, digits, _ . - (at most 64)", r.Name)
	}
	if !filepath.IsAbs(r.Exec) || strings.ContainsRune(r.Exec, 0) {
		return core.FieldErrorf(core.CodeInvalidArgument, "exec", "exec must be an absolute path")
	}
	r.Exec = filepath.Clean(r.Exec)
	for _, e := range r.Env {
		if e == "" || strings.ContainsAny(e, "=\x00") {
			return core.FieldErrorf(core.CodeInvalidArgument, "env", "invalid variable name %q", e)
		}
	}
	return nil
}

// TrainerRegister records an external trainer program under a name (an
// admin's decision, in the audit log). The program must exist and be an
// executable regular file (a *.py script: a regular file) on this machine.
func (a *App) TrainerRegister(ctx context.Context, p Principal, req TrainerRegisterRequest) (core.ExtTrainer, error) {
	return run(ctx, a, p, &opTrainerRegister, req, func(ctx context.Context, p Principal, req TrainerRegisterRequest) (core.ExtTrainer, error) {
		s, err := a.trainerStore()
		if err != nil {
			return core.ExtTrainer{}, err
		}
		st, err := os.Stat(req.Exec)
		switch {
		case err != nil:
			return core.ExtTrainer{}, core.FieldErrorf(core.CodeNotFound, "exec", "%s: no such file", req.Exec)
		case !st.Mode().IsRegular():
			return core.ExtTrainer{}, core.FieldErrorf(core.CodeInvalidArgument, "exec", "%s is not a regular file", req.Exec)
		case !strings.HasSuffix(req.Exec, ".py") && st.Mode().Perm()&0o111 == 0:
			return core.ExtTrainer{}, core.FieldErrorf(core.CodeInvalidArgument, "exec", "%s is not executable", req.Exec)
		}
		t, err := s.RegisterTrainer(ctx, core.ExtTrainer{Name: req.Name, Command: req.Exec, Env: req.Env, RegisteredBy: p.Name})
		if err != nil {
			return t, err
		}
		if _, err := a.auditLog().Append(ctx, p.Name, "trainer.register", "ext:"+t.Name, "", map[string]any{"exec": t.Command, "env": t.Env}); err != nil {
			return t, err
		}
		return t, nil
	})
}

// TrainerListResponse lists the trainers a job can name.
type TrainerListResponse struct {
	Native []string `json:"native" jsonschema:"native trainer references"`
	// NativeParams is keyed by native trainer reference.
	NativeParams map[string][]string `json:"nativeParams" jsonschema:"the param names of each native trainer (aml trainer show REF for their schema)"`
	External     []core.ExtTrainer   `json:"external" jsonschema:"registered external trainers (jobs name them ext:NAME)"`
}

// TrainerListRequest takes no parameters.
type TrainerListRequest struct{}

// TrainerList lists the native and the registered external trainers.
func (a *App) TrainerList(ctx context.Context, p Principal, req TrainerListRequest) (TrainerListResponse, error) {
	return run(ctx, a, p, &opTrainerList, req, func(ctx context.Context, p Principal, _ TrainerListRequest) (TrainerListResponse, error) {
		out := TrainerListResponse{Native: []string{}, NativeParams: map[string][]string{}, External: []core.ExtTrainer{}}
		if a.d.Runner != nil {
			out.Native = a.d.Runner.TrainerRefs()
		}
		for _, ref := range out.Native {
			if s := a.paramSchema(ref); s != nil {
				out.NativeParams[ref] = trainer.PropertyNames(s)
			}
		}
		s, err := a.trainerStore()
		if err != nil {
			return out, err
		}
		ts, err := s.ListTrainers(ctx)
		if err != nil {
			return out, err
		}
		out.External = ts
		return out, nil
	})
}

// checkTrainerRef is the job-submit rule for the trainer reference:
// "exec:PATH" runs a program named by the caller, which only a person at
// the machine (the local CLI, Principal.Local) may do; over the API and
// MCP external trainers are named ext:NAME (registered by an admin).
func checkTrainerRef(p Principal, ref string) error {
	if strings.HasPrefix(ref, "exec:") && !p.Local {
		return core.FieldErrorf(core.CodeForbidden, "trainer",
			"trainer %q runs a program named by path, which only the local CLI may do; ask an admin to register it (aml trainer register NAME --exec PATH) and submit ext:NAME", ref)
	}
	return nil
}

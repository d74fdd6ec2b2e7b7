package auth

import (
	"context"
	"slices"
	"strings"

	"github.com/aml-project/aml/internal/core"
)

// Role is a principal's role.
type Role string

// Roles.
const (
	RoleViewer   Role = "viewer"
	RoleEngineer Role = "engineer"
	RoleApprover Role = "approver"
	RoleAdmin    Role = "admin"
	RoleAgent    Role = "agent"
)

// Roles lists every role in a stable order (for usage text and validation).
var Roles = []Role{RoleViewer, RoleEngineer, RoleApprover, RoleAdmin, RoleAgent}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// ParseRole returns the role named s or AML_INVALID_ARGUMENT (field "role").
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", core.FieldErrorf(core.CodeInvalidArgument, "role", "unknown role %q (viewer, engineer, approver, admin, agent)", s)
	}
	return r, nil
}

// Principal is an authenticated caller.
type Principal struct {
	// Name is the person or agent (the token's name); the actor of audited
	// actions.
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Lines is the line scope; empty means all lines.
	Lines   []string `json:"lines,omitempty"`
	TokenID string   `json:"tokenId,omitempty"`
	// Local is true only for a person at the machine: the local CLI
	// (cmd/aml, without --server) sets it for the OS user. The API and MCP
	// never do (it is not in the JSON form and no token carries it), so
	// what only a person at the machine may do — run a program named by
	// path (trainer "exec:PATH") — is refused over them.
	Local bool `json:"-"`
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal in ctx, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// Action is something a principal asks to do.
type Action string

// Actions. The comment names the roles allowed.
const (
	ActRead              Action = "read"                     // everyone
	ActIngest            Action = "ingest"                   // engineer, admin, agent
	ActDataset           Action = "dataset"                  // build/delete datasets: engineer, admin, agent
	ActJob               Action = "job"                      // submit/cancel/retry: engineer, admin, agent
	ActTrial             Action = "trial"                    // snapshots, trials, optimise, gate, calibration request, scene put (draft): engineer, admin, agent
	ActCertRequest       Action = "cert.request"             // issue a certificate (queued for a person): engineer, admin, agent
	ActCertApprove       Action = "cert.approve"             // approve/revoke: approver, admin — never agent
	ActPromoteProduction Action = "model.promote.production" // approver, admin — never agent
	ActModelStage        Action = "model.stage"              // other stage moves: engineer, approver, admin
	ActSceneFreeze       Action = "scene.freeze"             // approver, admin — never agent
	ActWrite             Action = "write"                    // execute a certificate / channel set: approver, admin — never agent
	ActAdmin             Action = "admin"                    // tokens, retention, env: admin
)

// Actions lists every action (for tests and documentation).
var Actions = []Action{ActRead, ActIngest, ActDataset, ActJob, ActTrial, ActCertRequest, ActCertApprove,
	ActPromoteProduction, ActModelStage, ActSceneFreeze, ActWrite, ActAdmin}

// allowed is the role table: the one place that says which role may take
// which action. Admin may do everything and is not listed.
var allowed = map[Action][]Role{
	ActRead:              {RoleViewer, RoleEngineer, RoleApprover, RoleAgent},
	ActIngest:            {RoleEngineer, RoleAgent},
	ActDataset:           {RoleEngineer, RoleAgent},
	ActJob:               {RoleEngineer, RoleAgent},
	ActTrial:             {RoleEngineer, RoleAgent},
	ActCertRequest:       {RoleEngineer, RoleAgent},
	ActCertApprove:       {RoleApprover},
	ActPromoteProduction: {RoleApprover},
	ActModelStage:        {RoleEngineer, RoleApprover},
	ActSceneFreeze:       {RoleApprover},
	ActWrite:             {RoleApprover},
	ActAdmin:             {},
}

// RoleAllows reports whether role r may take action a, line scope aside.
func RoleAllows(r Role, a Action) bool {
	roles, ok := allowed[a]
	if !ok || !r.Valid() {
		return false // unknown actions and roles fail closed
	}
	return r == RoleAdmin || slices.Contains(roles, r)
}

// Allow returns nil when p may take action a on a resource of line lineID,
// or AML_FORBIDDEN (403) with field "role" (the role may not take the
// action) or "lineId" (the line is outside p's scope). The line scope is
// checked only when lineID is not empty; callers listing several lines
// filter with InScope instead. The line refusal never names lineID: it is
// most often the line of a stored object the caller named by id, and a
// caller must not learn the lines outside its scope (it names p's own).
func (p Principal) Allow(a Action, lineID string) error {
	if !RoleAllows(p.Role, a) {
		who := p.Name
		if who == "" {
			who = "caller"
		}
		return core.FieldErrorf(core.CodeForbidden, "role", "%s (role %s) may not %s", who, p.Role, a)
	}
	if lineID != "" && !p.InScope(lineID) {
		return p.ScopeRefusal()
	}
	return nil
}

// ScopeRefusal is the line-scope refusal of Allow: AML_FORBIDDEN, field
// "lineId", naming p's own lines only. The application layer gives it
// also for an object a scoped caller named that does not exist, so that
// "of another line" and "not there" cannot be told apart.
func (p Principal) ScopeRefusal() error {
	return core.FieldErrorf(core.CodeForbidden, "lineId", "that line is outside the scope of %s (lines %s)", p.Name, strings.Join(p.Lines, ", "))
}

// InScope reports whether line is within p's line scope (all lines when
// p.Lines is empty).
func (p Principal) InScope(line string) bool {
	return len(p.Lines) == 0 || slices.Contains(p.Lines, line)
}

// AllLines reports whether p's scope is every line.
func (p Principal) AllLines() bool { return len(p.Lines) == 0 }

// AllowEveryLine is Allow for what spans every line and cannot be
// filtered by line (the server's Prometheus metrics): nil when p's role
// may take a and its scope is every line, else AML_FORBIDDEN with field
// "role" or "lineId" (naming p's own lines, as Allow does).
func (p Principal) AllowEveryLine(a Action) error {
	if err := p.Allow(a, ""); err != nil {
		return err
	}
	if !p.AllLines() {
		return core.FieldErrorf(core.CodeForbidden, "lineId", "this spans every line; %s is scoped to lines %s", p.Name, strings.Join(p.Lines, ", "))
	}
	return nil
}

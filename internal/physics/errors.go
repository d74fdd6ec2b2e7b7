package physics

import (
	"fmt"
	"sort"

	"github.com/aml-project/aml/internal/core"
)

// Error codes of this package. They are part of the public contract (CLI,
// API, MCP): never rename one, only add.
const (
	// CodePhysicsInvalid: a model source does not parse or fails a static
	// check (names, arguments, units, domains, cycles, equations). Every
	// finding is in [core.Error.Problems], each Field is "file:line:col".
	// HTTP 422.
	CodePhysicsInvalid = core.CodePhysicsInvalid
	// CodePhysicsNonFinite: a simulation step produced NaN or ±Inf in a
	// state or an output. Field names the variable ("next(x)", "d(x)" or the
	// output name). HTTP 422.
	CodePhysicsNonFinite = core.CodePhysicsNonFinite
)

// Wrong vector lengths, out-of-bounds or non-finite parameters and other
// caller mistakes use [core.CodeInvalidArgument] (HTTP 400).

func newErr(code, field, format string, args ...any) *core.Error {
	return core.FieldErrorf(code, field, format, args...)
}

// Pos is a position in a model source: 1-based line and column. Columns
// count Unicode characters, tabs count as one.
type Pos struct {
	Line, Col int
}

// diag collects problems (errors and warnings) with positions.
type diag struct {
	file     string
	errs     []posProblem
	warns    []posProblem
	maxProbs int
}

type posProblem struct {
	pos Pos
	msg string
}

func (d *diag) errorf(p Pos, format string, args ...any) {
	d.errs = append(d.errs, posProblem{p, fmt.Sprintf(format, args...)})
}

func (d *diag) warnf(p Pos, format string, args ...any) {
	d.warns = append(d.warns, posProblem{p, fmt.Sprintf(format, args...)})
}

// busy reports many problems already: helpers that cost time per problem
// (did-you-mean suggestions, hints) are skipped from then on, so that a
// huge broken source stays linear.
func (d *diag) busy() bool { return len(d.errs)+len(d.warns) > 100 }

func (d *diag) field(p Pos) string {
	return fmt.Sprintf("%s:%d:%d", d.file, p.Line, p.Col)
}

// problems sorts by position (stable, so several findings at one position
// keep their order), removes exact duplicates and converts.
func (d *diag) problems(list []posProblem) []core.Problem {
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].pos.Line != list[j].pos.Line {
			return list[i].pos.Line < list[j].pos.Line
		}
		return list[i].pos.Col < list[j].pos.Col
	})
	out := make([]core.Problem, 0, len(list))
	for i, p := range list {
		if i > 0 && p == list[i-1] {
			continue
		}
		out = append(out, core.Problem{Field: d.field(p.pos), Message: p.msg})
	}
	if d.maxProbs > 0 && len(out) > d.maxProbs {
		n := len(out) - d.maxProbs
		out = append(out[:d.maxProbs], core.Problem{Field: out[d.maxProbs].Field, Message: fmt.Sprintf("and %d more problem(s)", n)})
	}
	return out
}

func (d *diag) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return core.Invalid(CodePhysicsInvalid, d.problems(d.errs))
}

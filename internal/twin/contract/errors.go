package contract

import (
	"errors"
	"fmt"

	"github.com/aml-project/aml/internal/core"
)

// Error codes of this package. They are part of the public contract (CLI,
// API, MCP): never rename one, only add.
const (
	// CodeContractInvalid: a twin contract (scene, binding, objective,
	// trial, certificate, ...) fails validation. Every finding is in
	// [core.Error.Problems], each Field a JSON path. HTTP 422.
	CodeContractInvalid = core.CodeContractInvalid
	// CodeSceneFrozen: a change to a frozen scene contract was attempted.
	// A frozen scene never changes; derive a new version with
	// [SceneContract.NextVersion]. HTTP 409.
	CodeSceneFrozen = core.CodeSceneFrozen
)

// problems collects every finding of a validation.
type problems []core.Problem

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// err returns nil when p is empty, else an AML_CONTRACT_INVALID error.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return invalidErr(p)
}

func invalidErr(p []core.Problem) *core.Error {
	return core.Invalid(CodeContractInvalid, p)
}

// Invalidf builds a single-problem AML_CONTRACT_INVALID error (HTTP 422).
func Invalidf(field, format string, args ...any) *core.Error {
	return invalidErr([]core.Problem{{Field: field, Message: fmt.Sprintf(format, args...)}})
}

// ProblemsOf returns the problems of an AML_CONTRACT_INVALID error (nil
// for any other error).
func ProblemsOf(err error) []core.Problem {
	var ae *core.Error
	if err == nil || core.CodeOf(err) != CodeContractInvalid {
		return nil
	}
	if errors.As(err, &ae) {
		if len(ae.Problems) > 0 {
			return ae.Problems
		}
		return []core.Problem{{Field: ae.Field, Message: ae.Message}}
	}
	return nil
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

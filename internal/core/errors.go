package core

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one finding of a validation that reports every problem at once.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is AML's typed error: a stable code (registered in codes.go with
// its kind), a human message and the offending field (a flag, a JSON path,
// a file:line:column). Transports derive their status from the code's kind.
type Error struct {
	Code    string
	Message string
	Field   string
	// Problems lists every finding when a validation found several; Field
	// and Message then describe the first.
	Problems []Problem
	Err      error // wrapped cause, may be nil
}

// Invalid builds an error with code from a list of problems (nil if the list
// is empty). Message summarises all of them; Field is the first one's.
func Invalid(code string, problems []Problem) *Error {
	if len(problems) == 0 {
		return nil
	}
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.Field + ": " + p.Message
	}
	msg := fmt.Sprintf("%d problem(s): %s", len(problems), strings.Join(parts, "; "))
	e := Errorf(code, "%s", msg)
	e.Field = problems[0].Field
	e.Problems = problems
	return e
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf builds an *Error that names the offending field.
func FieldErrorf(code, field, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.Field = field
	return e
}

// Wrap turns err into an *Error with code unless it already is one.
func Wrap(code string, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		return err
	}
	e := Errorf(code, format+": %v", append(args, err)...)
	e.Err = err
	return e
}

// CodeOf returns the code of the first *Error in err's chain, or
// AML_INTERNAL for any other non-nil error, or "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return CodeInternal
}

// MessageOf is err's human message: an *Error's Message (without its code
// and field), else err.Error().
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

package core

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Names of people and agents (the actor of an audited action, a
// certificate's requester and approver, a token's name) are compared by
// their identity key, and checked where they enter AML (token creation,
// the CLI's --as, every op's principal): a name that could look like
// another one without being equal to it is refused there rather than
// compared cleverly later.

// IdentityKey is the form two names are compared in: surrounding white
// space trimmed, NFC-normalised and case-folded (Unicode full case
// folding), then NFC again. Two names are the same identity when their
// keys are equal (SameName).
func IdentityKey(name string) string {
	s := norm.NFC.String(strings.TrimSpace(name))
	return norm.NFC.String(cases.Fold().String(s))
}

// SameName reports whether a and b name the same identity (IdentityKey).
func SameName(a, b string) bool { return IdentityKey(a) == IdentityKey(b) }

// CheckName refuses a name (AML_INVALID_ARGUMENT on field) that is not
// valid UTF-8 or holds a character that is invisible or changes how text
// around it displays: control characters (Cc), format characters (Cf:
// zero-width space and joiners, soft hyphen, bidi controls, BOM, word
// joiner …), other default-ignorable code points (Hangul fillers, …),
// variation selectors, private-use and unassigned code points, and any
// white space but the ASCII space. An empty name passes (required-ness is
// the caller's rule).
func CheckName(field, name string) error {
	if !utf8.ValidString(name) {
		return FieldErrorf(CodeInvalidArgument, field, "%s is not valid UTF-8", field)
	}
	for i, r := range name {
		if bad := nameRuneProblem(r); bad != "" {
			return FieldErrorf(CodeInvalidArgument, field, "%s %+q holds %s (U+%04X at byte %d): names must be visible text", field, name, bad, r, i)
		}
	}
	return nil
}

func nameRuneProblem(r rune) string {
	switch {
	case r == ' ':
		return ""
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character"
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return "a default-ignorable character"
	case unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r):
		return "white space other than the ASCII space"
	case unicode.Is(unicode.Co, r):
		return "a private-use character"
	case r == utf8.RuneError || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S):
		return "an unassigned or non-text character"
	}
	return ""
}

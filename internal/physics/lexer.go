package physics

import (
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tNewline
	tIdent
	tNumber
	tLParen   // (
	tRParen   // )
	tLBrack   // [
	tRBrack   // ]
	tComma    // ,
	tAssign   // =
	tPlus     // +
	tMinus    // -
	tStar     // *
	tSlash    // /
	tCaret    // ^ or **
	tLT       // <
	tLE       // <=
	tGT       // >
	tGE       // >=
	tEQ       // ==
	tNE       // !=
	tPercent  // % (units only)
	tQuestion // ? (units only)
)

var tokNames = [...]string{
	tEOF: "end of file", tNewline: "end of line", tIdent: "name", tNumber: "number",
	tLParen: "'('", tRParen: "')'", tLBrack: "'['", tRBrack: "']'", tComma: "','",
	tAssign: "'='", tPlus: "'+'", tMinus: "'-'", tStar: "'*'", tSlash: "'/'", tCaret: "'^'",
	tLT: "'<'", tLE: "'<='", tGT: "'>'", tGE: "'>='", tEQ: "'=='", tNE: "'!='",
	tPercent: "'%'", tQuestion: "'?'",
}

func (k tokKind) String() string { return tokNames[k] }

type token struct {
	kind tokKind
	text string
	pos  Pos
	off  int // byte offset of the first byte
	end  int // byte offset after the last byte
}

func (t token) describe() string {
	switch t.kind {
	case tIdent:
		return "name \"" + t.text + "\""
	case tNumber:
		return "number " + t.text
	}
	return t.kind.String()
}

// isWordOp reports whether an identifier token is a word operator.
func isWordOp(t token) bool {
	return t.kind == tIdent && (t.text == "and" || t.text == "or")
}

// binaryLike reports tokens after which a line break does not end the
// statement, and before which a line break does not end it either.
func binaryLike(t token) bool {
	switch t.kind {
	case tPlus, tMinus, tStar, tSlash, tCaret, tLT, tLE, tGT, tGE, tEQ, tNE:
		return true
	}
	return isWordOp(t)
}

// lex splits src into tokens. Newlines become tNewline tokens except where
// a statement obviously continues: inside ( ) or [ ], after an operator,
// '=' or ',' and before a line that starts with a binary operator, ')' or
// ']'. Lexical errors are reported to d and the offending character skipped.
func lex(src []byte, d *diag) []token {
	var toks []token
	line, col := 1, 1
	i := 0
	emit := func(k tokKind, start, end int, p Pos) {
		toks = append(toks, token{kind: k, text: string(src[start:end]), pos: p, off: start, end: end})
	}
	for i < len(src) {
		c := src[i]
		p := Pos{line, col}
		switch {
		case c == '\n':
			emit(tNewline, i, i+1, p)
			i++
			line++
			col = 1
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			col++
			continue
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				_, n := utf8.DecodeRune(src[i:])
				i += n
			}
			continue
		case isLetter(c):
			j := i
			for j < len(src) && (isLetter(src[j]) || isDigit(src[j])) {
				j++
			}
			emit(tIdent, i, j, p)
			col += j - i
			i = j
			continue
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			j := i
			for j < len(src) && (isDigit(src[j]) || src[j] == '.') {
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && isDigit(src[k]) {
					for k < len(src) && isDigit(src[k]) {
						k++
					}
					j = k
				}
			}
			emit(tNumber, i, j, p)
			col += j - i
			i = j
			continue
		}
		two := ""
		if i+1 < len(src) {
			two = string(src[i : i+2])
		}
		var k tokKind
		n := 1
		switch two {
		case "<=":
			k, n = tLE, 2
		case ">=":
			k, n = tGE, 2
		case "==":
			k, n = tEQ, 2
		case "!=":
			k, n = tNE, 2
		case "**":
			k, n = tCaret, 2
		default:
			switch c {
			case '(':
				k = tLParen
			case ')':
				k = tRParen
			case '[':
				k = tLBrack
			case ']':
				k = tRBrack
			case ',':
				k = tComma
			case '=':
				k = tAssign
			case '+':
				k = tPlus
			case '-':
				k = tMinus
			case '*':
				k = tStar
			case '/':
				k = tSlash
			case '^':
				k = tCaret
			case '<':
				k = tLT
			case '>':
				k = tGT
			case '%':
				k = tPercent
			case '?':
				k = tQuestion
			default:
				r, size := utf8.DecodeRune(src[i:])
				if r == utf8.RuneError && size <= 1 {
					d.errorf(p, "invalid UTF-8 byte 0x%02x", c)
				} else {
					d.errorf(p, "unexpected character %q", r)
				}
				i += size
				col++
				continue
			}
		}
		emit(k, i, i+n, p)
		i += n
		col += n
	}
	toks = append(toks, token{kind: tEOF, pos: Pos{line, col}, off: len(src), end: len(src)})
	return joinLines(toks)
}

// joinLines drops the newline tokens that do not end a statement and
// collapses runs of newlines.
func joinLines(toks []token) []token {
	out := toks[:0:0]
	depth := 0
	for i, t := range toks {
		switch t.kind {
		case tLParen, tLBrack:
			depth++
		case tRParen, tRBrack:
			if depth > 0 {
				depth--
			}
		case tNewline:
			if depth > 0 || len(out) == 0 || out[len(out)-1].kind == tNewline {
				continue
			}
			prev := out[len(out)-1]
			if binaryLike(prev) || prev.kind == tAssign || prev.kind == tComma || prev.kind == tLParen || prev.kind == tLBrack {
				continue
			}
			// Look at the first token of the next non-empty line.
			j := i + 1
			for j < len(toks) && toks[j].kind == tNewline {
				j++
			}
			if j < len(toks) {
				nx := toks[j]
				// A statement never starts with an operator (not even + or
				// -), ')' , ']' or ',': such a line continues the previous.
				if binaryLike(nx) || nx.kind == tRParen || nx.kind == tRBrack || nx.kind == tComma {
					continue
				}
			}
		}
		out = append(out, t)
	}
	return out
}

func isLetter(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

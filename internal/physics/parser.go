package physics

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// maxDepth bounds expression and unit nesting.
const maxDepth = 200

type parser struct {
	toks  []token
	i     int
	src   []byte
	d     *diag
	m     *rawModel
	cur   *rawDecl
	depth int
}

type bailout struct{}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// fail reports an error and abandons the current statement.
func (p *parser) fail(pos Pos, format string, args ...any) {
	p.d.errorf(pos, format, args...)
	panic(bailout{})
}

func (p *parser) expect(k tokKind, context string) token {
	t := p.peek()
	if t.kind != k {
		p.fail(t.pos, "expected %s %s, found %s", k, context, t.describe())
	}
	return p.next()
}

func (p *parser) isWord(w string) bool {
	t := p.peek()
	return t.kind == tIdent && t.text == w
}

func (p *parser) atEnd() bool {
	k := p.peek().kind
	return k == tNewline || k == tEOF
}

func (p *parser) skipLine() {
	for !p.atEnd() {
		p.i++
	}
}

var statementWords = []string{"model", "solver", "dt", "state", "control", "disturbance", "param", "const", "let", "obs", "guard", "next", "d"}

func parseSource(name string, src []byte, d *diag) *rawModel {
	p := &parser{toks: lex(src, d), src: src, d: d, m: &rawModel{}}
	for p.peek().kind != tEOF {
		if p.peek().kind == tNewline {
			p.i++
			continue
		}
		p.statement()
	}
	_ = name
	return p.m
}

func (p *parser) statement() {
	p.cur = nil
	p.depth = 0
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			if p.cur != nil {
				p.cur.broken = true
			}
			p.skipLine()
		}
	}()
	t := p.peek()
	if t.kind != tIdent {
		p.fail(t.pos, "expected a statement (%s), found %s", strings.Join(statementWords, ", "), t.describe())
	}
	switch t.text {
	case "model":
		p.modelStmt()
	case "solver":
		p.solverStmt()
	case "dt":
		p.dtStmt()
	case "state":
		p.varDecl(KindState)
	case "control":
		p.varDecl(KindControl)
	case "disturbance":
		p.varDecl(KindDisturbance)
	case "param":
		p.paramDecl()
	case "const":
		p.exprDecl(KindConst)
	case "let":
		p.exprDecl(KindLet)
	case "obs":
		p.exprDecl(KindObs)
	case "guard":
		p.exprDecl(KindGuard)
	case "next", "d":
		p.equation()
	default:
		msg := "unknown statement \"" + t.text + "\""
		if s := suggest(t.text, statementWords); !p.d.busy() && s != "" {
			msg += " (did you mean \"" + s + "\"?)"
		}
		p.fail(t.pos, "%s; a statement starts with one of: %s", msg, strings.Join(statementWords, ", "))
	}
	if !p.atEnd() {
		t := p.peek()
		p.fail(t.pos, "unexpected %s: expected end of line", t.describe())
	}
}

var versionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

func (p *parser) modelStmt() {
	kw := p.next()
	if p.m.hasModel {
		p.d.errorf(kw.pos, "duplicate model statement (first at line %d)", p.m.namePos.Line)
	}
	name := p.expect(tIdent, "(the model name) after model")
	if !p.m.hasModel {
		p.m.hasModel = true
		p.m.name = name.text
		p.m.namePos = name.pos
	}
	if p.isWord("version") {
		p.next()
		v := p.next()
		if (v.kind != tNumber && v.kind != tIdent) || (v.kind == tNumber && !versionRe.MatchString(v.text)) {
			p.fail(v.pos, "expected a version like 1.0.0 after version, found %s", v.describe())
		}
		p.m.version = v.text
	}
}

func (p *parser) solverStmt() {
	kw := p.next()
	if p.m.solver != "" {
		p.d.errorf(kw.pos, "duplicate solver statement (first at line %d)", p.m.solverPos.Line)
	}
	s := p.expect(tIdent, "(discrete, euler or rk4) after solver")
	switch s.text {
	case "discrete", "euler", "rk4":
	default:
		p.fail(s.pos, "unknown solver %q: expected discrete, euler or rk4", s.text)
	}
	p.m.solver, p.m.solverPos = s.text, s.pos
	if p.isWord("substeps") {
		p.next()
		n := p.expect(tNumber, "after substeps")
		v, err := strconv.Atoi(n.text)
		if err != nil || v < 1 || v > 1_000_000 {
			p.fail(n.pos, "substeps must be a whole number from 1 to 1000000, found %s", n.text)
		}
		p.m.substeps, p.m.substepsPos = v, n.pos
	}
}

func (p *parser) dtStmt() {
	kw := p.next()
	if p.m.hasDt {
		p.d.errorf(kw.pos, "duplicate dt statement (first at line %d)", p.m.dtPos.Line)
	}
	n := p.expect(tNumber, "(the step length in seconds) after dt")
	v := p.number(n)
	if !(v > 0) || math.IsInf(v, 0) {
		p.fail(n.pos, "dt must be a positive number of seconds, found %s", n.text)
	}
	p.m.dt, p.m.hasDt, p.m.dtPos = v, true, kw.pos
	if p.isWord("s") {
		p.next()
	}
}

// number converts a number token; a malformed one is a statement error.
func (p *parser) number(t token) float64 {
	v, err := strconv.ParseFloat(t.text, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			p.fail(t.pos, "number %s is out of range", t.text)
		}
		p.fail(t.pos, "malformed number %s", t.text)
	}
	return v
}

// signedNumber parses [+|-] (NUMBER | inf if allowInf).
func (p *parser) signedNumber(context string, allowInf bool) (float64, Pos) {
	t := p.peek()
	sign := 1.0
	if t.kind == tMinus || t.kind == tPlus {
		if t.kind == tMinus {
			sign = -1
		}
		p.next()
	}
	n := p.peek()
	if allowInf && n.kind == tIdent && n.text == "inf" {
		p.next()
		return sign * math.Inf(1), t.pos
	}
	if n.kind != tNumber {
		p.fail(n.pos, "expected a number %s, found %s", context, n.describe())
	}
	p.next()
	return sign * p.number(n), t.pos
}

func (p *parser) declName(kind Kind) *rawDecl {
	p.next() // keyword
	name := p.expect(tIdent, "(the name) after "+kind.String())
	if why := reservedReason(name.text); why != "" {
		p.d.errorf(name.pos, "%q cannot be declared: %s", name.text, why)
	}
	d := &rawDecl{kind: kind, name: name.text, pos: name.pos, lo: math.Inf(-1), hi: math.Inf(1), def: math.NaN()}
	p.m.decls = append(p.m.decls, d)
	p.cur = d
	return d
}

func (p *parser) unitClause(d *rawDecl) {
	kw := p.next()
	if d.unit != nil {
		p.d.errorf(kw.pos, "duplicate unit clause for %q", d.name)
	}
	u := p.unitSpec(true)
	if d.unit == nil {
		d.unit = u
	}
}

func (p *parser) rangeClause(d *rawDecl) {
	kw := p.next()
	lbr := p.expect(tLBrack, "after range")
	lo, _ := p.signedNumber("(the lower end) in range", true)
	p.expect(tComma, "between the ends of the range")
	hi, _ := p.signedNumber("(the upper end) in range", true)
	p.expect(tRBrack, "after the range")
	if d.hasRange {
		p.d.errorf(kw.pos, "duplicate range clause for %q", d.name)
		return
	}
	if !(lo <= hi) || (math.IsInf(lo, 1)) || math.IsInf(hi, -1) {
		p.d.errorf(lbr.pos, "empty range [%g, %g]: the lower end must not exceed the upper end", lo, hi)
		return
	}
	d.hasRange, d.lo, d.hi = true, lo, hi
}

// varDecl parses state, control and disturbance declarations.
func (p *parser) varDecl(kind Kind) {
	d := p.declName(kind)
	for !p.atEnd() {
		t := p.peek()
		if t.kind != tIdent {
			break
		}
		switch t.text {
		case "unit":
			p.unitClause(d)
		case "range":
			p.rangeClause(d)
		case "init":
			p.next()
			if kind != KindState {
				p.fail(t.pos, "init is for states; a %s takes its value from the data (use default for a fallback)", kind)
			}
			e := p.expr()
			if d.init != nil {
				p.d.errorf(t.pos, "duplicate init clause for %q", d.name)
			} else {
				d.init = e
			}
		case "default":
			p.next()
			if kind == KindState {
				p.fail(t.pos, "default is for controls and disturbances; a state has init")
			}
			v, _ := p.signedNumber("after default", false)
			if d.hasDef {
				p.d.errorf(t.pos, "duplicate default clause for %q", d.name)
			} else {
				d.hasDef, d.def = true, v
			}
		default:
			clauses := "unit, range or init"
			if kind != KindState {
				clauses = "unit, range or default"
			}
			p.fail(t.pos, "unexpected %s: expected %s", t.describe(), clauses)
		}
	}
}

// paramDecl parses: param NAME [unit U] = VALUE in [LO, HI] [unit U].
func (p *parser) paramDecl() {
	d := p.declName(KindParam)
	if p.isWord("unit") {
		p.unitClause(d)
	}
	p.expect(tAssign, "after the parameter name")
	d.value, _ = p.signedNumber("(the nominal value)", false)
	if !p.isWord("in") {
		t := p.peek()
		p.fail(t.pos, "expected in [lo, hi] (the prior bounds) after the value, found %s", t.describe())
	}
	p.next()
	lbr := p.expect(tLBrack, "after in")
	lo, _ := p.signedNumber("(the lower bound)", false)
	p.expect(tComma, "between the bounds")
	hi, _ := p.signedNumber("(the upper bound)", false)
	p.expect(tRBrack, "after the bounds")
	d.lo, d.hi, d.hasRange = lo, hi, true
	switch {
	case !(lo <= hi):
		p.d.errorf(lbr.pos, "bounds [%g, %g] of %q are empty: the lower bound must not exceed the upper bound", lo, hi, d.name)
	case !(d.value >= lo && d.value <= hi):
		p.d.errorf(lbr.pos, "the value %g of %q is outside its bounds [%g, %g]", d.value, d.name, lo, hi)
	}
	if p.isWord("unit") {
		p.unitClause(d)
	}
}

// exprDecl parses: KW NAME [unit U] = EXPR [unit U].
func (p *parser) exprDecl(kind Kind) {
	d := p.declName(kind)
	if p.isWord("unit") {
		p.unitClause(d)
	}
	p.expect(tAssign, "after the name")
	d.expr = p.expr()
	if p.isWord("unit") {
		p.unitClause(d)
	}
}

func (p *parser) equation() {
	kw := p.next()
	p.expect(tLParen, "after "+kw.text)
	name := p.expect(tIdent, "(a state name)")
	p.expect(tRParen, "after the state name")
	p.expect(tAssign, "after "+kw.text+"("+name.text+")")
	eq := &rawEq{continuous: kw.text == "d", state: name.text, kwPos: kw.pos, pos: name.pos}
	// Registered before the right-hand side is parsed, so that a syntax
	// error there does not also report the state as having no equation.
	p.m.eqs = append(p.m.eqs, eq)
	eq.expr = p.expr()
}

// ---- units ----

// unitSpec parses a unit after "unit" (allowQ: "?" allowed) or inside a
// literal's brackets. Unknown names are reported and make the spec invalid
// without abandoning the statement.
func (p *parser) unitSpec(allowQ bool) *unitSpec {
	start := p.peek()
	if allowQ && start.kind == tQuestion {
		p.next()
		return &unitSpec{text: "?", pos: start.pos, any: true, valid: true}
	}
	us := &unitSpec{pos: start.pos, valid: true}
	u := p.unitProduct(us)
	last := p.toks[p.i-1]
	us.text = strings.Join(strings.Fields(string(p.src[start.off:last.end])), "")
	us.u = u
	return us
}

func (p *parser) unitProduct(us *unitSpec) unit {
	u := p.unitPower(us)
	for {
		t := p.peek()
		if t.kind != tStar && t.kind != tSlash {
			return u
		}
		p.next()
		v := p.unitPower(us)
		if !us.valid {
			continue
		}
		var ok bool
		if t.kind == tStar {
			u, ok = u.mul(v)
		} else {
			u, ok = u.div(v)
		}
		if !ok {
			p.d.errorf(t.pos, "unit exponent too complex")
			us.valid = false
		}
	}
}

func (p *parser) unitPower(us *unitSpec) unit {
	u := p.unitAtom(us)
	if p.peek().kind != tCaret {
		return u
	}
	c := p.next()
	e := p.unitExponent()
	if us.valid {
		var ok bool
		if u, ok = u.pow(e); !ok {
			p.d.errorf(c.pos, "unit exponent too complex")
			us.valid = false
		}
	}
	return u
}

func (p *parser) unitExponent() rat {
	t := p.peek()
	paren := false
	if t.kind == tLParen {
		paren = true
		p.next()
	}
	neg := false
	if s := p.peek(); s.kind == tMinus || s.kind == tPlus {
		neg = s.kind == tMinus
		p.next()
	}
	n := p.expect(tNumber, "(the exponent) in the unit")
	r, ok := ratFromFloat(p.number(n))
	if paren && p.peek().kind == tSlash {
		p.next()
		dn := p.expect(tNumber, "(the exponent's denominator) in the unit")
		dv, ok2 := ratFromFloat(p.number(dn))
		if ok && ok2 && !dv.isZero() {
			r, ok = r.mul(rat{dv.d, dv.n})
			if ok {
				r, ok = mkRat(r.n, r.d)
			}
		} else {
			ok = false
		}
	}
	if paren {
		p.expect(tRParen, "after the unit exponent")
	}
	if !ok {
		p.fail(n.pos, "unit exponent %s is not a simple fraction", n.text)
	}
	if neg {
		r = r.neg()
	}
	return r
}

func (p *parser) unitAtom(us *unitSpec) unit {
	t := p.peek()
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		p.fail(t.pos, "unit nested too deeply")
	}
	switch t.kind {
	case tIdent:
		p.next()
		u, ok := namedUnit(t.text)
		if !ok {
			msg := "unknown unit \"" + t.text + "\""
			if s := suggest(t.text, UnitNames()); !p.d.busy() && s != "" {
				msg += " (did you mean \"" + s + "\"?)"
			}
			p.d.errorf(t.pos, "%s; write unit ? to skip unit checks for this name", msg)
			us.valid = false
			return one
		}
		return u
	case tPercent:
		p.next()
		u, _ := namedUnit("%")
		return u
	case tNumber:
		p.next()
		if t.text != "1" {
			p.fail(t.pos, "unexpected number %s in a unit: only 1 may appear (as in 1/s)", t.text)
		}
		return one
	case tLParen:
		p.next()
		u := p.unitProduct(us)
		p.expect(tRParen, "in the unit")
		return u
	case tQuestion:
		p.fail(t.pos, "? must stand alone (unit ?) and is not allowed in a literal's unit")
	}
	p.fail(t.pos, "expected a unit, found %s", t.describe())
	return one
}

// ---- expressions ----

func (p *parser) enter(pos Pos) {
	p.depth++
	if p.depth > maxDepth {
		p.fail(pos, "expression nested too deeply (more than %d levels)", maxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) expr() *node {
	t := p.peek()
	if t.kind == tNewline || t.kind == tEOF {
		p.fail(t.pos, "expected an expression, found %s", t.describe())
	}
	return p.orExpr()
}

func binary(op opKind, pos Pos, a, b *node) *node {
	return &node{kind: nBinary, op: op, args: []*node{a, b}, pos: pos, off: a.off, end: b.end}
}

func (p *parser) orExpr() *node {
	a := p.andExpr()
	for p.isWord("or") {
		t := p.next()
		b := p.andExpr()
		a = binary(opOr, t.pos, a, b)
	}
	return a
}

func (p *parser) andExpr() *node {
	a := p.notExpr()
	for p.isWord("and") {
		t := p.next()
		b := p.notExpr()
		a = binary(opAnd, t.pos, a, b)
	}
	return a
}

func (p *parser) notExpr() *node {
	if p.isWord("not") {
		t := p.next()
		p.enter(t.pos)
		x := p.notExpr()
		p.leave()
		return &node{kind: nUnary, op: opNot, args: []*node{x}, pos: t.pos, off: t.off, end: x.end}
	}
	return p.cmpExpr()
}

var cmpOps = map[tokKind]opKind{tLT: opLT, tLE: opLE, tGT: opGT, tGE: opGE, tEQ: opEQ, tNE: opNE}

func (p *parser) cmpExpr() *node {
	a := p.sumExpr()
	if op, ok := cmpOps[p.peek().kind]; ok {
		t := p.next()
		b := p.sumExpr()
		a = binary(op, t.pos, a, b)
		if _, again := cmpOps[p.peek().kind]; again {
			p.fail(p.peek().pos, "comparisons cannot be chained: write a < b and b < c")
		}
	}
	return a
}

func (p *parser) sumExpr() *node {
	a := p.prodExpr()
	for {
		k := p.peek().kind
		if k != tPlus && k != tMinus {
			return a
		}
		t := p.next()
		b := p.prodExpr()
		op := opAdd
		if k == tMinus {
			op = opSub
		}
		a = binary(op, t.pos, a, b)
	}
}

func (p *parser) prodExpr() *node {
	a := p.unaryExpr()
	for {
		k := p.peek().kind
		if k != tStar && k != tSlash {
			return a
		}
		t := p.next()
		b := p.unaryExpr()
		op := opMul
		if k == tSlash {
			op = opDiv
		}
		a = binary(op, t.pos, a, b)
	}
}

func (p *parser) unaryExpr() *node {
	t := p.peek()
	if t.kind == tMinus || t.kind == tPlus {
		p.next()
		p.enter(t.pos)
		x := p.unaryExpr()
		p.leave()
		op := opNeg
		if t.kind == tPlus {
			op = opPos
		}
		return &node{kind: nUnary, op: op, args: []*node{x}, pos: t.pos, off: t.off, end: x.end}
	}
	return p.powExpr()
}

func (p *parser) powExpr() *node {
	a := p.primary()
	if p.peek().kind == tCaret {
		t := p.next()
		p.enter(t.pos)
		b := p.unaryExpr() // right-associative; allows 2^-1
		p.leave()
		a = binary(opPow, t.pos, a, b)
	}
	return a
}

func (p *parser) primary() *node {
	t := p.peek()
	p.enter(t.pos)
	defer p.leave()
	switch t.kind {
	case tNumber:
		p.next()
		n := &node{kind: nNum, val: p.number(t), pos: t.pos, off: t.off, end: t.end}
		if p.peek().kind == tLBrack {
			p.next()
			n.unit = p.unitSpec(false)
			rb := p.expect(tRBrack, "after the literal's unit")
			n.end = rb.end
		}
		return n
	case tIdent:
		if keywords[t.text] && t.text != "d" && t.text != "next" {
			p.fail(t.pos, "unexpected keyword %q in an expression", t.text)
		}
		p.next()
		if p.peek().kind == tLParen {
			p.next()
			call := &node{kind: nCall, name: t.text, pos: t.pos, off: t.off}
			if p.peek().kind != tRParen {
				for {
					call.args = append(call.args, p.expr())
					if p.peek().kind != tComma {
						break
					}
					p.next()
				}
			}
			rp := p.expect(tRParen, "to close the arguments of "+t.text+"(")
			call.end = rp.end
			return call
		}
		return &node{kind: nRef, name: t.text, pos: t.pos, off: t.off, end: t.end}
	case tLParen:
		p.next()
		x := p.expr()
		rp := p.expect(tRParen, "to close '('")
		// Widen the span to include the parentheses for display.
		cp := *x
		cp.off, cp.end = t.off, rp.end
		return &cp
	case tLBrack:
		p.fail(t.pos, "unexpected '[': a unit annotation follows a number, as in 0.05 [1/s]")
	case tPercent:
		p.fail(t.pos, "unexpected '%%': %% is a unit (write 5 [%%]); there is no modulo operator")
	}
	p.fail(t.pos, "expected an expression, found %s", t.describe())
	return nil
}

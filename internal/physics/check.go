package physics

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// qty is the static unit of an expression.
type qty struct {
	u       unit
	free    bool // a bare number: adopts the unit of what it meets in + - min max clamp comparisons and if branches; a factor 1 in * and /
	any     bool // unchecked (unit ?, or an earlier error)
	boolean bool // a condition (comparison, and, or, not)
}

var (
	qFree = qty{u: one, free: true}
	qAny  = qty{u: one, any: true}
	qOne  = qty{u: one}
	qBool = qty{u: one, boolean: true}
)

// context restricts what an expression may refer to.
type context uint8

const (
	ctxConst context = iota + 1 // const: literals, pi and other consts
	ctxInit                     // init: controls, disturbances, params, consts
	ctxStep                     // equations, let, obs, guard: everything
)

type checker struct {
	d           *diag
	m           *rawModel
	src         []byte
	names       map[string]*rawDecl
	byKind      map[Kind][]*rawDecl
	eqOf        map[string]*rawEq
	deps        map[*rawDecl][]*rawDecl // algebraic decl → algebraic decls it uses
	used        map[*rawDecl]bool
	order       []*rawDecl // algebraic decls (const, let, obs, guard) in dependency order
	inCyc       map[*rawDecl]bool
	qty         map[*rawDecl]qty
	ivs         map[*rawDecl]ival
	consts      map[*rawDecl]float64
	cmpIv       map[*node][2]ival
	sortedNames []string // operand intervals of the last evaluation of each comparison
	dtIv        ival
	solver      string
	// broken names whose declaration failed; references are not reported.
	brokenNames map[string]bool
}

func check(m *rawModel, src []byte, d *diag) *checker {
	c := &checker{
		d: d, m: m, src: src,
		names:       map[string]*rawDecl{},
		byKind:      map[Kind][]*rawDecl{},
		eqOf:        map[string]*rawEq{},
		deps:        map[*rawDecl][]*rawDecl{},
		used:        map[*rawDecl]bool{},
		inCyc:       map[*rawDecl]bool{},
		qty:         map[*rawDecl]qty{},
		ivs:         map[*rawDecl]ival{},
		consts:      map[*rawDecl]float64{},
		cmpIv:       map[*node][2]ival{},
		brokenNames: map[string]bool{},
	}
	c.header()
	c.declare()
	c.equations()
	c.resolveAll()
	c.sortAlgebraic()
	c.unitsAll()
	c.intervalsAll()
	c.unusedWarnings()
	return c
}

func (c *checker) header() {
	m := c.m
	if !m.hasModel {
		c.d.errorf(Pos{1, 1}, "missing model statement (model NAME version X.Y.Z)")
	}
	c.solver = m.solver
	if c.solver == "" {
		c.solver = "discrete"
	}
	if m.substeps > 0 && c.solver == "discrete" {
		c.d.errorf(m.substepsPos, "substeps needs solver euler or rk4; a discrete model takes exactly one step per dt")
	}
	if m.hasDt {
		c.dtIv = point(m.dt)
	} else {
		c.dtIv = ival{lo: math.SmallestNonzeroFloat64, hi: math.Inf(1)}
	}
}

func (c *checker) declare() {
	for _, d := range c.m.decls {
		if reservedReason(d.name) != "" {
			continue // reported by the parser
		}
		if prev, ok := c.names[d.name]; ok {
			c.d.errorf(d.pos, "duplicate declaration of %q (first declared as %s at line %d)", d.name, prev.kind, prev.pos.Line)
			continue
		}
		c.names[d.name] = d
		d.index = len(c.byKind[d.kind])
		c.byKind[d.kind] = append(c.byKind[d.kind], d)
		if d.broken {
			c.brokenNames[d.name] = true
		}
	}
}

func (c *checker) equations() {
	continuous := c.solver != "discrete"
	for _, eq := range c.m.eqs {
		kw := "next"
		if eq.continuous {
			kw = "d"
		}
		d, ok := c.names[eq.state]
		switch {
		case !ok:
			if c.brokenNames[eq.state] {
				continue
			}
			msg := fmt.Sprintf("%s(%s): unknown state %q", kw, eq.state, eq.state)
			if s := c.suggest(eq.state, c.namesOf(KindState)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			c.d.errorf(eq.pos, "%s", msg)
			continue
		case d.kind != KindState:
			c.d.errorf(eq.pos, "%s(%s): %q is a %s, not a state", kw, eq.state, eq.state, d.kind)
			continue
		}
		if eq.continuous != continuous {
			if continuous {
				c.d.errorf(eq.kwPos, "next(%s) needs solver discrete, but the solver is %s: write d(%s) = ... (the time derivative)", eq.state, c.solver, eq.state)
			} else {
				c.d.errorf(eq.kwPos, "d(%s) needs solver euler or rk4, but the solver is discrete: write next(%s) = ... or change the solver", eq.state, eq.state)
			}
		}
		if prev, ok := c.eqOf[eq.state]; ok {
			c.d.errorf(eq.kwPos, "second equation for state %q (the first is at line %d): each state has exactly one", eq.state, prev.kwPos.Line)
			continue
		}
		c.eqOf[eq.state] = eq
	}
	for _, s := range c.byKind[KindState] {
		if _, ok := c.eqOf[s.name]; !ok && !s.broken {
			want := "next(%s) = ..."
			if continuous {
				want = "d(%s) = ..."
			}
			c.d.errorf(s.pos, "state %q has no equation: add "+want, s.name, s.name)
		}
	}
}

func (c *checker) namesOf(kinds ...Kind) []string {
	var out []string
	for _, k := range kinds {
		for _, d := range c.byKind[k] {
			out = append(out, d.name)
		}
	}
	return out
}

func (c *checker) suggestAll(name string) string {
	if c.d.busy() {
		return ""
	}
	if c.sortedNames == nil {
		c.sortedNames = c.allNames()
	}
	return suggest(name, c.sortedNames)
}

func (c *checker) allNames() []string {
	out := make([]string, 0, len(c.names)+2)
	for k := range c.names {
		out = append(out, k)
	}
	out = append(out, "dt", "pi")
	sort.Strings(out)
	return out
}

func (c *checker) suggest(name string, candidates []string) string {
	if c.d.busy() {
		return ""
	}
	return suggest(name, candidates)
}

// ---- resolution and types ----

func (c *checker) resolveAll() {
	for _, d := range c.m.decls {
		if c.names[d.name] != d {
			// Not registered (duplicate or reserved): still check the
			// expression for its own errors, without dependencies.
			switch {
			case d.expr != nil:
				c.resolveTop(d.expr, ctxFor(d.kind), nil)
			case d.init != nil:
				c.resolveTop(d.init, ctxInit, nil)
			}
			continue
		}
		switch {
		case d.kind.algebraic() && d.expr != nil:
			c.resolveTop(d.expr, ctxFor(d.kind), d)
		case d.kind == KindState && d.init != nil:
			c.resolveTop(d.init, ctxInit, nil)
		}
	}
	for _, eq := range c.m.eqs {
		if eq.expr != nil {
			c.resolveTop(eq.expr, ctxStep, nil)
		}
	}
}

func ctxFor(k Kind) context {
	if k == KindConst {
		return ctxConst
	}
	return ctxStep
}

func (c *checker) resolveTop(n *node, ctx context, owner *rawDecl) {
	if c.resolve(n, ctx, owner) {
		c.d.errorf(n.pos, "expected a number, found a condition: a comparison or and/or/not can only be the first argument of if(...)")
	}
}

// resolve checks names, argument counts and number/condition types. It
// returns true when n is a condition.
func (c *checker) resolve(n *node, ctx context, owner *rawDecl) bool {
	switch n.kind {
	case nNum:
		return false
	case nRef:
		c.resolveRef(n, ctx, owner)
		return false
	case nUnary:
		b := c.resolve(n.args[0], ctx, owner)
		if n.op == opNot {
			if !b {
				c.d.errorf(n.pos, "not needs a condition (a comparison), found a number")
			}
			return true
		}
		if b {
			c.d.errorf(n.pos, "%s needs a number, found a condition", opText[n.op])
		}
		return false
	case nBinary:
		a := c.resolve(n.args[0], ctx, owner)
		b := c.resolve(n.args[1], ctx, owner)
		if n.op.isLogic() {
			if !a || !b {
				c.d.errorf(n.pos, "%s needs conditions (comparisons) on both sides", opText[n.op])
			}
			return true
		}
		if a || b {
			c.d.errorf(n.pos, "%s needs numbers on both sides, found a condition", opText[n.op])
		}
		return n.op.isCompare()
	case nCall:
		return c.resolveCall(n, ctx, owner)
	}
	return false
}

func (c *checker) resolveCall(n *node, ctx context, owner *rawDecl) bool {
	bi, ok := builtins[n.name]
	if !ok {
		switch {
		case n.name == "d" || n.name == "next":
			c.d.errorf(n.pos, "%s(...) may only start an equation line, as in %s(x) = ...", n.name, n.name)
		case c.names[n.name] != nil:
			c.d.errorf(n.pos, "%q is a %s, not a function", n.name, c.names[n.name].kind)
		default:
			msg := fmt.Sprintf("unknown function %q", n.name)
			if s := c.suggest(n.name, FunctionNames()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			c.d.errorf(n.pos, "%s; functions: %s", msg, strings.Join(FunctionNames(), ", "))
		}
		for _, a := range n.args {
			c.resolve(a, ctx, owner)
		}
		return false
	}
	if len(n.args) < bi.minArgs || (bi.maxArgs >= 0 && len(n.args) > bi.maxArgs) {
		want := fmt.Sprintf("%d", bi.minArgs)
		if bi.maxArgs < 0 {
			want = fmt.Sprintf("at least %d", bi.minArgs)
		}
		c.d.errorf(n.pos, "%s takes %s argument(s), found %d", n.name, want, len(n.args))
	}
	for i, a := range n.args {
		b := c.resolve(a, ctx, owner)
		if n.name == "if" && i == 0 {
			if !b {
				c.d.errorf(a.pos, "the first argument of if must be a condition such as x > 0, found a number")
			}
			continue
		}
		if b {
			c.d.errorf(a.pos, "argument %d of %s must be a number, found a condition", i+1, n.name)
		}
	}
	return false
}

func (c *checker) resolveRef(n *node, ctx context, owner *rawDecl) {
	switch n.name {
	case "dt":
		if ctx != ctxStep {
			c.d.errorf(n.pos, "dt is not available in %s: it is only known while stepping", ctxName(ctx))
		}
		return
	case "t":
		c.d.errorf(n.pos, "t (time) is not available: models are time-invariant; feed time-dependent signals as controls or disturbances")
		return
	case "pi":
		return
	}
	if _, ok := builtins[n.name]; ok {
		c.d.errorf(n.pos, "%s is a function: call it as %s(...)", n.name, n.name)
		return
	}
	d, ok := c.names[n.name]
	if !ok {
		if c.brokenNames[n.name] {
			return
		}
		msg := fmt.Sprintf("unknown name %q", n.name)
		if s := c.suggestAll(n.name); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.d.errorf(n.pos, "%s", msg)
		return
	}
	c.used[d] = true
	switch ctx {
	case ctxConst:
		if d.kind != KindConst {
			c.d.errorf(n.pos, "a const can only use numbers and other consts; %q is a %s", n.name, d.kind)
			return
		}
	case ctxInit:
		switch d.kind {
		case KindControl, KindDisturbance, KindParam, KindConst:
		default:
			c.d.errorf(n.pos, "init can only use controls, disturbances, params and consts; %q is a %s", n.name, d.kind)
			return
		}
	}
	if owner != nil && d.kind.algebraic() {
		c.deps[owner] = append(c.deps[owner], d)
	}
}

func ctxName(ctx context) string {
	switch ctx {
	case ctxConst:
		return "a const"
	case ctxInit:
		return "init"
	}
	return "this expression"
}

// ---- dependency order and cycles ----

func (c *checker) sortAlgebraic() {
	const (
		white = iota
		grey
		black
	)
	color := map[*rawDecl]int{}
	var stack []*rawDecl
	var visit func(d *rawDecl)
	visit = func(d *rawDecl) {
		color[d] = grey
		stack = append(stack, d)
		for _, dep := range c.deps[d] {
			switch color[dep] {
			case white:
				visit(dep)
			case grey:
				// Cycle: the stack from dep to the top.
				i := len(stack) - 1
				for stack[i] != dep {
					i--
				}
				cyc := stack[i:]
				path := make([]string, 0, len(cyc)+1)
				for _, x := range cyc {
					path = append(path, x.name)
					c.inCyc[x] = true
				}
				path = append(path, dep.name)
				c.d.errorf(dep.pos, "cycle among definitions: %s (a let, obs, guard or const cannot depend on itself)", strings.Join(path, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		color[d] = black
		c.order = append(c.order, d)
	}
	for _, d := range c.m.decls {
		if c.names[d.name] == d && d.kind.algebraic() && color[d] == white {
			visit(d)
		}
	}
}

// ---- units ----

func (c *checker) declQty(d *rawDecl) qty {
	if d.unit == nil {
		return qOne
	}
	if d.unit.any || !d.unit.valid {
		return qAny
	}
	return qty{u: d.unit.u}
}

func (c *checker) unitsAll() {
	for _, d := range c.m.decls {
		if c.names[d.name] != d || d.kind.algebraic() {
			continue
		}
		c.qty[d] = c.declQty(d)
	}
	for _, d := range c.order {
		if d.broken || c.inCyc[d] || d.expr == nil {
			c.qty[d] = qAny
			continue
		}
		q := c.units(d.expr)
		if d.unit != nil {
			dq := c.declQty(d)
			c.checkAssign(d.pos, dq, q, fmt.Sprintf("%s %s", d.kind, d.name))
			q = dq
		}
		c.qty[d] = q
	}
	for _, d := range c.byKind[KindState] {
		if d.init != nil {
			c.checkAssign(d.init.pos, c.qty[d], c.units(d.init), "init of "+d.name)
		}
	}
	for _, eq := range c.m.eqs {
		if eq.expr == nil {
			continue
		}
		q := c.units(eq.expr)
		s, ok := c.names[eq.state]
		if !ok || s.kind != KindState || eq.continuous != (c.solver != "discrete") {
			continue
		}
		want := c.qty[s]
		what := "next(" + eq.state + ")"
		if eq.continuous {
			what = "d(" + eq.state + ")"
			if !want.any {
				sec, _ := namedUnit("s")
				u, ok := want.u.div(sec)
				if !ok {
					want = qAny
				} else {
					want = qty{u: u}
				}
			}
		}
		c.checkAssign(eq.kwPos, want, q, what)
	}
}

func (c *checker) checkAssign(pos Pos, want, got qty, what string) {
	if want.any || got.any || got.free || got.boolean {
		return
	}
	if !want.u.same(got.u) {
		c.d.errorf(pos, "unit mismatch: %s must be in %s, but the expression is in %s", what, unitDesc(want.u), unitDesc2(want.u, got.u))
	}
}

func unitDesc(u unit) string { return u.String() + " [" + u.dimString() + "]" }

func unitDesc2(want, got unit) string {
	if want.sameDim(got) {
		return got.String() + " (same dimension, but the scale differs by a factor " + fmt.Sprintf("%.6g", got.scale/want.scale) + "; the language never converts units)"
	}
	return unitDesc(got)
}

func (c *checker) unify(pos Pos, what string, a, b qty) qty {
	switch {
	case a.any || b.any:
		return qAny
	case a.free && b.free:
		return qFree
	case a.free:
		return b
	case b.free:
		return a
	}
	if !a.u.same(b.u) {
		c.d.errorf(pos, "unit mismatch in %s: %s", what, mismatch(a.u, b.u))
		return qAny
	}
	return a
}

func (c *checker) units(n *node) qty {
	switch n.kind {
	case nNum:
		if n.unit == nil {
			return qFree
		}
		if !n.unit.valid {
			return qAny
		}
		return qty{u: n.unit.u}
	case nRef:
		switch n.name {
		case "pi":
			return qFree
		case "dt":
			u, _ := namedUnit("s")
			return qty{u: u}
		}
		d, ok := c.names[n.name]
		if !ok {
			return qAny
		}
		q, ok := c.qty[d]
		if !ok {
			return qAny
		}
		return q
	case nUnary:
		a := c.units(n.args[0])
		if n.op == opNot {
			return qBool
		}
		return a
	case nBinary:
		a, b := c.units(n.args[0]), c.units(n.args[1])
		switch n.op {
		case opAdd:
			return c.unify(n.pos, "'+'", a, b)
		case opSub:
			return c.unify(n.pos, "'-'", a, b)
		case opMul, opDiv:
			return c.mulDiv(n, a, b)
		case opPow:
			return c.powUnit(n, n.args[0], n.args[1], a, b)
		case opAnd, opOr:
			return qBool
		}
		if n.op.isCompare() {
			c.unify(n.pos, "comparison '"+opText[n.op]+"'", a, b)
			return qBool
		}
	case nCall:
		return c.callUnits(n)
	}
	return qAny
}

func (c *checker) mulDiv(n *node, a, b qty) qty {
	switch {
	case a.any || b.any || a.boolean || b.boolean:
		return qAny
	case a.free && b.free:
		return qFree
	}
	au, bu := a.u, b.u
	if a.free {
		au = one
	}
	if b.free {
		bu = one
	}
	var r unit
	var ok bool
	if n.op == opMul {
		r, ok = au.mul(bu)
	} else {
		r, ok = au.div(bu)
	}
	if !ok {
		c.d.errorf(n.pos, "unit exponent too complex")
		return qAny
	}
	return qty{u: r}
}

// pureArg checks that q is a pure number; false after reporting it.
func (c *checker) pureArg(fn string, a *node, q qty) bool {
	if q.any || q.free || q.boolean || q.u.isOne() {
		return true
	}
	c.d.errorf(a.pos, "%s needs a pure number (unit 1), found %s: divide by a reference value first", fn, unitDesc(q.u))
	return false
}

func (c *checker) powUnit(n, base, exp *node, bq, eq qty) qty {
	okExp := c.pureArg("the exponent of "+opText[opPow], exp, eq)
	switch {
	case bq.any || eq.any || !okExp:
		return qAny
	case bq.free && eq.free:
		return qFree
	case bq.free || bq.u.isOne():
		return qOne
	}
	v, ok := c.constValue(exp)
	if !ok {
		c.d.errorf(n.pos, "a base with a unit (%s) needs a constant exponent (numbers and consts only)", bq.u)
		return qAny
	}
	r, ok := ratFromFloat(v)
	if !ok {
		c.d.errorf(n.pos, "the exponent %g of a base with a unit (%s) must be a simple fraction", v, bq.u)
		return qAny
	}
	u, ok := bq.u.pow(r)
	if !ok {
		c.d.errorf(n.pos, "unit exponent too complex")
		return qAny
	}
	return qty{u: u}
}

func (c *checker) callUnits(n *node) qty {
	if _, ok := builtins[n.name]; !ok {
		for _, a := range n.args {
			c.units(a)
		}
		return qAny
	}
	qs := make([]qty, len(n.args))
	for i, a := range n.args {
		qs[i] = c.units(a)
	}
	bi := builtins[n.name]
	if len(n.args) < bi.minArgs || (bi.maxArgs >= 0 && len(n.args) > bi.maxArgs) {
		return qAny
	}
	switch n.name {
	case "exp", "log", "tanh", "sin", "cos":
		if !c.pureArg(n.name, n.args[0], qs[0]) || qs[0].any {
			return qAny
		}
		if qs[0].free {
			return qFree
		}
		return qOne
	case "sqrt":
		q := qs[0]
		if q.any || q.free || q.boolean {
			return q
		}
		u, ok := q.u.pow(rat{1, 2})
		if !ok {
			c.d.errorf(n.pos, "unit exponent too complex")
			return qAny
		}
		return qty{u: u}
	case "abs":
		return qs[0]
	case "sign":
		if qs[0].free || qs[0].any {
			return qs[0]
		}
		return qOne
	case "min", "max", "clamp":
		q := qs[0]
		for i := 1; i < len(qs); i++ {
			q = c.unify(n.args[i].pos, n.name+"(...) arguments", q, qs[i])
		}
		return q
	case "pow":
		return c.powUnit(n, n.args[0], n.args[1], qs[0], qs[1])
	case "if":
		return c.unify(n.args[2].pos, "the branches of if(...)", qs[1], qs[2])
	}
	return qAny
}

// constValue evaluates n if it uses only numbers, pi and consts.
func (c *checker) constValue(n *node) (float64, bool) {
	ok := true
	v := evalNode(n, func(r *node) float64 {
		if r.name == "pi" {
			return builtinConsts["pi"]
		}
		d, found := c.names[r.name]
		if !found || d.kind != KindConst {
			ok = false
			return math.NaN()
		}
		cv, done := c.consts[d]
		if !done {
			ok = false
			return math.NaN()
		}
		return cv
	})
	return v, ok
}

// ---- intervals ----

type ienv struct {
	name string
	iv   ival
	next *ienv
}

func (e *ienv) lookup(name string) (ival, bool) {
	for ; e != nil; e = e.next {
		if e.name == name {
			return e.iv, true
		}
	}
	return ival{}, false
}

func (c *checker) intervalsAll() {
	for _, d := range c.m.decls {
		if c.names[d.name] != d || d.kind.algebraic() {
			continue
		}
		switch d.kind {
		case KindParam:
			c.ivs[d] = ival{lo: d.lo, hi: d.hi}
		default:
			if d.hasRange {
				c.ivs[d] = ival{lo: d.lo, hi: d.hi}
			} else {
				c.ivs[d] = ival{lo: math.Inf(-1), hi: math.Inf(1), unranged: true}
			}
		}
	}
	for _, d := range c.order {
		if d.broken || c.inCyc[d] || d.expr == nil {
			c.ivs[d] = everything
			continue
		}
		if d.kind == KindConst {
			v, ok := c.constValue(d.expr)
			if ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
				c.d.errorf(d.pos, "const %s evaluates to %v", d.name, v)
				ok = false
			}
			if ok {
				c.consts[d] = v
				c.ivs[d] = point(v)
				continue
			}
		}
		c.ivs[d] = c.interval(d.expr, nil, true)
	}
	for _, d := range c.byKind[KindState] {
		if d.init != nil {
			c.interval(d.init, nil, true)
		}
	}
	for _, eq := range c.m.eqs {
		if eq.expr != nil {
			c.interval(eq.expr, nil, true)
		}
	}
}

func (c *checker) text(n *node) string {
	if n.off < 0 || n.end > len(c.src) || n.off >= n.end {
		return "?"
	}
	s := strings.Join(strings.Fields(string(c.src[n.off:n.end])), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// unrangedNames lists the names without a declared range that n uses,
// directly or through let/obs/guard definitions.
func (c *checker) unrangedNames(n *node) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(n *node, depth int)
	walk = func(n *node, depth int) {
		if depth > 50 {
			return
		}
		if n.kind == nRef {
			d, ok := c.names[n.name]
			if !ok || seen[n.name] {
				return
			}
			seen[n.name] = true
			switch d.kind {
			case KindState, KindControl, KindDisturbance:
				if !d.hasRange {
					out = append(out, n.name)
				}
			case KindLet, KindObs, KindGuard:
				if d.expr != nil && !c.inCyc[d] {
					walk(d.expr, depth+1)
				}
			}
		}
		for _, a := range n.args {
			walk(a, depth+1)
		}
	}
	walk(n, 0)
	sort.Strings(out)
	return out
}

// domain reports a domain problem: an error, or a warning when the interval
// depends on names without a declared range.
func (c *checker) domain(pos Pos, arg *node, iv ival, live bool, format string, args ...any) {
	if !live {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if iv.unranged {
		var names []string
		if !c.d.busy() {
			names = c.unrangedNames(arg)
		}
		hint := "declare a range on the states, controls and disturbances involved"
		if len(names) > 0 {
			hint = "declare range [lo, hi] on " + strings.Join(names, ", ")
		}
		c.d.warnf(pos, "%s; it depends on values without a declared range: %s to check it", msg, hint)
		return
	}
	c.d.errorf(pos, "%s", msg)
}

func (c *checker) interval(n *node, env *ienv, live bool) ival {
	switch n.kind {
	case nNum:
		return point(n.val)
	case nRef:
		if iv, ok := env.lookup(n.name); ok {
			return iv
		}
		switch n.name {
		case "pi":
			return point(builtinConsts["pi"])
		case "dt":
			return c.dtIv
		}
		d, ok := c.names[n.name]
		if !ok {
			return everything
		}
		iv, ok := c.ivs[d]
		if !ok {
			return everything
		}
		return iv
	case nUnary:
		a := c.interval(n.args[0], env, live)
		switch n.op {
		case opNeg:
			return ineg(a)
		case opNot:
			return ibool(a.hi >= 1, a.lo <= 0, a.unranged)
		}
		return a
	case nBinary:
		a := c.interval(n.args[0], env, live)
		b := c.interval(n.args[1], env, live)
		switch n.op {
		case opAdd:
			return iadd(a, b)
		case opSub:
			return isub(a, b)
		case opMul:
			return imul(a, b)
		case opDiv:
			r, ok := idiv(a, b)
			if !ok {
				c.domain(n.pos, n.args[1], b, live, "division by zero possible: the denominator %s can be 0 (its interval is %s)", c.text(n.args[1]), b)
			}
			return r
		case opPow:
			return c.powInterval(n, n.args[0], n.args[1], a, b, live)
		case opAnd:
			return ibool(a.lo <= 0 || b.lo <= 0, a.hi >= 1 && b.hi >= 1, a.unranged || b.unranged)
		case opOr:
			return ibool(a.lo <= 0 && b.lo <= 0, a.hi >= 1 || b.hi >= 1, a.unranged || b.unranged)
		}
		if n.op.isCompare() {
			// Kept for narrowEnv, which runs right after the condition
			// was evaluated in the same environment: re-evaluating the
			// operands there would be exponential in the nesting depth.
			c.cmpIv[n] = [2]ival{a, b}
			return icompare(n.op, a, b)
		}
	case nCall:
		return c.callInterval(n, env, live)
	}
	return everything
}

func (c *checker) powInterval(n, base, exp *node, a, b ival, live bool) ival {
	u := a.unranged || b.unranged
	if v, ok := c.constValue(exp); ok && !math.IsNaN(v) {
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			if v < 0 && a.contains(0) {
				c.domain(n.pos, base, a, live, "division by zero possible: %s can be 0 and is raised to the negative power %g (its interval is %s)", c.text(base), v, a)
				return ival{lo: math.Inf(-1), hi: math.Inf(1), unranged: u}
			}
			return ipowInt(a, int64(v))
		}
		if a.lo < 0 {
			c.domain(n.pos, base, a, live, "a negative number raised to the non-integer power %g is not a number: %s can be negative (its interval is %s)", v, c.text(base), a)
		}
		if v < 0 && a.contains(0) {
			c.domain(n.pos, base, a, live, "division by zero possible: %s can be 0 and is raised to the negative power %g (its interval is %s)", c.text(base), v, a)
		}
		lo := math.Max(a.lo, 0)
		r := ival{lo: math.Pow(lo, v), hi: math.Pow(math.Max(a.hi, 0), v), unranged: u}
		if v < 0 {
			r.lo, r.hi = r.hi, r.lo
		}
		return fix(r)
	}
	if a.lo < 0 {
		c.domain(n.pos, base, a, live, "a power with a variable exponent needs a base >= 0: %s can be negative (its interval is %s)", c.text(base), a)
	}
	if a.contains(0) && b.lo < 0 {
		c.domain(n.pos, base, a, live, "division by zero possible: %s can be 0 and the exponent can be negative", c.text(base))
	}
	x0, x1 := math.Max(a.lo, 0), math.Max(a.hi, 0)
	p := []float64{math.Pow(x0, b.lo), math.Pow(x0, b.hi), math.Pow(x1, b.lo), math.Pow(x1, b.hi)}
	r := ival{lo: p[0], hi: p[0], unranged: u}
	for _, v := range p[1:] {
		r.lo, r.hi = math.Min(r.lo, v), math.Max(r.hi, v)
	}
	return fix(r)
}

func (c *checker) callInterval(n *node, env *ienv, live bool) ival {
	bi, ok := builtins[n.name]
	if !ok || len(n.args) < bi.minArgs || (bi.maxArgs >= 0 && len(n.args) > bi.maxArgs) {
		for _, a := range n.args {
			c.interval(a, env, live)
		}
		return everything
	}
	if n.name == "if" {
		return c.ifInterval(n, env, live)
	}
	iv := make([]ival, len(n.args))
	for i, a := range n.args {
		iv[i] = c.interval(a, env, live)
	}
	a := iv[0]
	switch n.name {
	case "exp":
		return mono(a, math.Exp)
	case "log":
		if a.lo <= 0 {
			c.domain(n.pos, n.args[0], a, live, "log of a value that can be <= 0: %s has the interval %s", c.text(n.args[0]), a)
		}
		if a.hi <= 0 {
			return ival{lo: math.Inf(-1), hi: math.Inf(1), unranged: a.unranged}
		}
		return fix(ival{lo: math.Log(math.Max(a.lo, 0)), hi: math.Log(a.hi), unranged: a.unranged})
	case "sqrt":
		if a.lo < 0 {
			c.domain(n.pos, n.args[0], a, live, "sqrt of a value that can be negative: %s has the interval %s", c.text(n.args[0]), a)
		}
		return fix(ival{lo: math.Sqrt(math.Max(a.lo, 0)), hi: math.Sqrt(math.Max(a.hi, 0)), unranged: a.unranged})
	case "abs":
		return iabs(a)
	case "tanh":
		return mono(a, math.Tanh)
	case "sin", "cos":
		if a.lo == a.hi {
			f := math.Sin
			if n.name == "cos" {
				f = math.Cos
			}
			return mono(a, f)
		}
		return ival{lo: -1, hi: 1, unranged: a.unranged}
	case "sign":
		return isign(a)
	case "min":
		r := a
		for _, b := range iv[1:] {
			r = imin(r, b)
		}
		return r
	case "max":
		r := a
		for _, b := range iv[1:] {
			r = imax(r, b)
		}
		return r
	case "clamp":
		return iclamp(a, iv[1], iv[2])
	case "pow":
		return c.powInterval(n, n.args[0], n.args[1], a, iv[1], live)
	}
	return everything
}

// ifInterval analyses both branches, skipping the one the condition rules
// out, and narrows a name compared in the condition inside each branch:
// in if(x > 0, 1/x, 0) the division sees x in (0, hi].
func (c *checker) ifInterval(n *node, env *ienv, live bool) ival {
	cond := c.interval(n.args[0], env, live)
	canTrue, canFalse := cond.hi >= 1, cond.lo <= 0
	thenEnv := c.narrowEnv(n.args[0], env, false)
	elseEnv := c.narrowEnv(n.args[0], env, true)
	a := c.interval(n.args[1], thenEnv, live && canTrue)
	b := c.interval(n.args[2], elseEnv, live && canFalse)
	switch {
	case !canTrue:
		return b
	case !canFalse:
		return a
	}
	return join(a, b)
}

func (c *checker) narrowEnv(cond *node, env *ienv, negate bool) *ienv {
	if cond.kind == nBinary && cond.op == opAnd && !negate {
		env = c.narrowEnv(cond.args[0], env, false)
		return c.narrowEnv(cond.args[1], env, false)
	}
	if cond.kind == nBinary && cond.op == opOr && negate {
		env = c.narrowEnv(cond.args[0], env, true)
		return c.narrowEnv(cond.args[1], env, true)
	}
	if cond.kind == nUnary && cond.op == opNot {
		return c.narrowEnv(cond.args[0], env, !negate)
	}
	if cond.kind != nBinary || !cond.op.isCompare() {
		return env
	}
	op := cond.op
	if negate {
		op = negateCmp(op)
	}
	l, r := cond.args[0], cond.args[1]
	ivs, ok := c.cmpIv[cond]
	if !ok {
		return env
	}
	// Narrow the name's current interval: an enclosing branch or an
	// earlier part of an `and` may have narrowed it already.
	cur := func(n *node, cached ival) ival {
		if iv, ok := env.lookup(n.name); ok {
			return iv
		}
		return cached
	}
	if l.kind == nRef {
		env = &ienv{name: l.name, iv: narrow(cur(l, ivs[0]), op, ivs[1]), next: env}
	}
	if r.kind == nRef {
		env = &ienv{name: r.name, iv: narrow(cur(r, ivs[1]), flipCmp(op), ivs[0]), next: env}
	}
	return env
}

// ---- warnings ----

func (c *checker) unusedWarnings() {
	for _, d := range c.m.decls {
		if c.names[d.name] != d || c.used[d] || d.broken {
			continue
		}
		switch d.kind {
		case KindControl, KindDisturbance, KindParam, KindConst, KindLet:
			c.d.warnf(d.pos, "%s %q is declared but never used", d.kind, d.name)
		}
	}
}

package physics

import (
	"math"
)

// opcode is one instruction of the compiled program. Every instruction
// reads slots a, b, c and writes slot dst of one flat []float64; jumps use
// dst as the target.
type opcode uint8

const (
	ocMov opcode = iota
	ocAdd
	ocSub
	ocMul
	ocDiv
	ocPow
	ocNeg
	ocExp
	ocLog
	ocSqrt
	ocAbs
	ocTanh
	ocSin
	ocCos
	ocSign
	ocMin
	ocMax
	ocClamp
	ocLT
	ocLE
	ocGT
	ocGE
	ocEQ
	ocNE
	ocAnd
	ocOr
	ocNot
	ocJmpFalse // if s[a] == 0 { pc = dst }
	ocJmp      // pc = dst
)

type instr struct {
	op           opcode
	dst, a, b, c int32
}

// program is the compiled form of a model, shared by all its Sims.
type program struct {
	nSlots    int
	constVals []float64 // slots [0, len(constVals))
	pBase     int32
	xBase     int32
	uBase     int32
	dBase     int32
	dtSlot    int32
	rBase     int32   // rhs of next()/d(), one per state
	outSlots  []int32 // obs then guards
	outNames  []string
	eqNames   []string // "next(x)" or "d(x)", per state
	full      []instr  // all algebraics, outputs and right-hand sides
	deriv     []instr  // only what the right-hand sides need (euler/rk4 stages after the first)
	init      []instr  // init expressions into the state slots
	initSet   []bool   // state has an init expression
	uDefaults []float64
	dDefaults []float64
	dAllDef   bool // every disturbance has a default
}

type compiler struct {
	c      *checker
	p      *program
	slots  int32
	consts map[uint64]int32
	isC    map[*node]bool
	declAt map[*rawDecl]int32 // slot of each declared name
	code   []instr
}

func compile(c *checker, m *Model) *program {
	p := &program{}
	cp := &compiler{c: c, p: p, consts: map[uint64]int32{}, isC: map[*node]bool{}, declAt: map[*rawDecl]int32{}}
	// Constants are interned as they are met, so the variable slots go
	// after a first pass that collects them: compile once into throwaway
	// code to intern, then lay out.
	var all []*node
	for _, d := range c.order {
		if d.kind != KindConst {
			all = append(all, d.expr)
		}
	}
	for _, eq := range c.m.eqs {
		all = append(all, eq.expr)
	}
	for _, s := range c.byKind[KindState] {
		if s.init != nil {
			all = append(all, s.init)
		}
	}
	for _, n := range all {
		cp.collectConsts(n)
	}
	nConst := int32(len(p.constVals))
	cp.slots = nConst
	alloc := func(n int) int32 { b := cp.slots; cp.slots += int32(n); return b }
	p.pBase = alloc(len(m.Params))
	p.xBase = alloc(len(m.States))
	p.uBase = alloc(len(m.Controls))
	p.dBase = alloc(len(m.Disturbances))
	p.dtSlot = alloc(1)
	for k, base := range map[Kind]int32{KindParam: p.pBase, KindState: p.xBase, KindControl: p.uBase, KindDisturbance: p.dBase} {
		for _, d := range c.byKind[k] {
			cp.declAt[d] = base + int32(d.index)
		}
	}
	for _, d := range c.order {
		if d.kind != KindConst { // consts are folded into constant slots
			cp.declAt[d] = alloc(1)
		}
	}
	p.rBase = alloc(len(m.States))
	for _, k := range []Kind{KindObs, KindGuard} {
		for _, d := range c.byKind[k] {
			p.outSlots = append(p.outSlots, cp.declAt[d])
			p.outNames = append(p.outNames, d.name)
		}
	}
	states := c.byKind[KindState]
	p.eqNames = make([]string, len(states))
	for i, s := range states {
		if eq := c.eqOf[s.name]; eq != nil && eq.continuous {
			p.eqNames[i] = "d(" + s.name + ")"
		} else {
			p.eqNames[i] = "next(" + s.name + ")"
		}
	}

	// full program
	for _, d := range c.order {
		if d.kind != KindConst {
			cp.exprInto(d.expr, cp.declAt[d])
		}
	}
	for i, s := range states {
		cp.exprInto(c.eqOf[s.name].expr, p.rBase+int32(i))
	}
	p.full, cp.code = cp.code, nil

	// derivative program: the algebraics the right-hand sides need
	need := map[*rawDecl]bool{}
	var mark func(n *node)
	mark = func(n *node) {
		if n.kind == nRef {
			if d, ok := c.names[n.name]; ok && d.kind.algebraic() && d.kind != KindConst && !need[d] {
				need[d] = true
				mark(d.expr)
			}
		}
		for _, a := range n.args {
			mark(a)
		}
	}
	for _, s := range states {
		mark(c.eqOf[s.name].expr)
	}
	for _, d := range c.order {
		if need[d] {
			cp.exprInto(d.expr, cp.declAt[d])
		}
	}
	for i, s := range states {
		cp.exprInto(c.eqOf[s.name].expr, p.rBase+int32(i))
	}
	p.deriv, cp.code = cp.code, nil

	// init program
	p.initSet = make([]bool, len(states))
	for i, s := range states {
		if s.init != nil {
			cp.exprInto(s.init, p.xBase+int32(i))
			p.initSet[i] = true
		}
	}
	p.init, cp.code = cp.code, nil

	p.nSlots = int(cp.slots)
	p.uDefaults = make([]float64, len(m.Controls))
	for i, d := range m.Controls {
		p.uDefaults[i] = d.Value
	}
	p.dDefaults = m.DisturbanceDefaults()
	p.dAllDef = true
	for _, v := range p.dDefaults {
		if math.IsNaN(v) {
			p.dAllDef = false
		}
	}
	return p
}

// isConst reports (memoised) whether n uses only numbers, pi and consts.
func (cp *compiler) isConst(n *node) bool {
	if v, ok := cp.isC[n]; ok {
		return v
	}
	r := true
	switch n.kind {
	case nRef:
		if n.name != "pi" {
			d, ok := cp.c.names[n.name]
			r = ok && d.kind == KindConst
		}
	case nCall:
		if _, ok := builtins[n.name]; !ok {
			r = false
		}
	}
	for _, a := range n.args {
		if !cp.isConst(a) {
			r = false
		}
	}
	cp.isC[n] = r
	return r
}

func (cp *compiler) constEval(n *node) float64 {
	v, _ := cp.c.constValue(n)
	return v
}

// collectConsts interns the constants an expression will need.
func (cp *compiler) collectConsts(n *node) {
	if cp.isConst(n) {
		cp.constSlot(cp.constEval(n))
		return
	}
	for _, a := range n.args {
		cp.collectConsts(a)
	}
}

func (cp *compiler) constSlot(v float64) int32 {
	k := math.Float64bits(v)
	if s, ok := cp.consts[k]; ok {
		return s
	}
	s := int32(len(cp.p.constVals))
	if cp.slots > s {
		// Layout is fixed already: a constant not met in collectConsts
		// (cannot happen) would overlap variables.
		panic("physics: constant interned after layout")
	}
	cp.p.constVals = append(cp.p.constVals, v)
	cp.consts[k] = s
	return s
}

func (cp *compiler) emit(in instr) int {
	cp.code = append(cp.code, in)
	return len(cp.code) - 1
}

func (cp *compiler) temp() int32 {
	s := cp.slots
	cp.slots++
	return s
}

// exprInto compiles n so that its value ends up in slot dst.
func (cp *compiler) exprInto(n *node, dst int32) {
	if s := cp.expr(n, dst); s != dst {
		cp.emit(instr{op: ocMov, dst: dst, a: s})
	}
}

var binOps = map[opKind]opcode{
	opAdd: ocAdd, opSub: ocSub, opMul: ocMul, opDiv: ocDiv, opPow: ocPow,
	opLT: ocLT, opLE: ocLE, opGT: ocGT, opGE: ocGE, opEQ: ocEQ, opNE: ocNE,
	opAnd: ocAnd, opOr: ocOr,
}

var unaryFns = map[string]opcode{
	"exp": ocExp, "log": ocLog, "sqrt": ocSqrt, "abs": ocAbs, "tanh": ocTanh,
	"sin": ocSin, "cos": ocCos, "sign": ocSign,
}

// expr compiles n and returns the slot holding its value: dst if dst >= 0
// and n needed an instruction, otherwise the slot of a constant or name.
func (cp *compiler) expr(n *node, dst int32) int32 {
	if cp.isConst(n) {
		return cp.constSlot(cp.constEval(n))
	}
	target := func() int32 {
		if dst >= 0 {
			return dst
		}
		return cp.temp()
	}
	switch n.kind {
	case nRef:
		if n.name == "dt" {
			return cp.p.dtSlot
		}
		return cp.declAt[cp.c.names[n.name]]
	case nUnary:
		switch n.op {
		case opPos:
			return cp.expr(n.args[0], dst)
		case opNeg:
			a := cp.expr(n.args[0], -1)
			t := target()
			cp.emit(instr{op: ocNeg, dst: t, a: a})
			return t
		case opNot:
			a := cp.expr(n.args[0], -1)
			t := target()
			cp.emit(instr{op: ocNot, dst: t, a: a})
			return t
		}
	case nBinary:
		a := cp.expr(n.args[0], -1)
		b := cp.expr(n.args[1], -1)
		t := target()
		cp.emit(instr{op: binOps[n.op], dst: t, a: a, b: b})
		return t
	case nCall:
		if oc, ok := unaryFns[n.name]; ok {
			a := cp.expr(n.args[0], -1)
			t := target()
			cp.emit(instr{op: oc, dst: t, a: a})
			return t
		}
		switch n.name {
		case "min", "max":
			oc := ocMin
			if n.name == "max" {
				oc = ocMax
			}
			acc := cp.expr(n.args[0], -1)
			for i := 1; i < len(n.args); i++ {
				b := cp.expr(n.args[i], -1)
				var t int32
				if i == len(n.args)-1 {
					t = target()
				} else {
					t = cp.temp()
				}
				cp.emit(instr{op: oc, dst: t, a: acc, b: b})
				acc = t
			}
			return acc
		case "clamp":
			a := cp.expr(n.args[0], -1)
			b := cp.expr(n.args[1], -1)
			c := cp.expr(n.args[2], -1)
			t := target()
			cp.emit(instr{op: ocClamp, dst: t, a: a, b: b, c: c})
			return t
		case "pow":
			a := cp.expr(n.args[0], -1)
			b := cp.expr(n.args[1], -1)
			t := target()
			cp.emit(instr{op: ocPow, dst: t, a: a, b: b})
			return t
		case "if":
			cond := cp.expr(n.args[0], -1)
			t := target()
			jf := cp.emit(instr{op: ocJmpFalse, a: cond})
			cp.exprInto(n.args[1], t)
			j := cp.emit(instr{op: ocJmp})
			cp.code[jf].dst = int32(len(cp.code))
			cp.exprInto(n.args[2], t)
			cp.code[j].dst = int32(len(cp.code))
			return t
		}
	}
	panic("physics: cannot compile node") // unreachable for checked models
}

// run executes code on the slots.
func run(code []instr, s []float64) {
	for pc := 0; pc < len(code); pc++ {
		in := &code[pc]
		switch in.op {
		case ocMov:
			s[in.dst] = s[in.a]
		case ocAdd:
			s[in.dst] = s[in.a] + s[in.b]
		case ocSub:
			s[in.dst] = s[in.a] - s[in.b]
		case ocMul:
			s[in.dst] = s[in.a] * s[in.b]
		case ocDiv:
			s[in.dst] = s[in.a] / s[in.b]
		case ocPow:
			s[in.dst] = math.Pow(s[in.a], s[in.b])
		case ocNeg:
			s[in.dst] = -s[in.a]
		case ocExp:
			s[in.dst] = math.Exp(s[in.a])
		case ocLog:
			s[in.dst] = math.Log(s[in.a])
		case ocSqrt:
			s[in.dst] = math.Sqrt(s[in.a])
		case ocAbs:
			s[in.dst] = math.Abs(s[in.a])
		case ocTanh:
			s[in.dst] = math.Tanh(s[in.a])
		case ocSin:
			s[in.dst] = math.Sin(s[in.a])
		case ocCos:
			s[in.dst] = math.Cos(s[in.a])
		case ocSign:
			s[in.dst] = signF(s[in.a])
		case ocMin:
			s[in.dst] = math.Min(s[in.a], s[in.b])
		case ocMax:
			s[in.dst] = math.Max(s[in.a], s[in.b])
		case ocClamp:
			s[in.dst] = clampF(s[in.a], s[in.b], s[in.c])
		case ocLT:
			s[in.dst] = b2f(s[in.a] < s[in.b])
		case ocLE:
			s[in.dst] = b2f(s[in.a] <= s[in.b])
		case ocGT:
			s[in.dst] = b2f(s[in.a] > s[in.b])
		case ocGE:
			s[in.dst] = b2f(s[in.a] >= s[in.b])
		case ocEQ:
			s[in.dst] = b2f(s[in.a] == s[in.b])
		case ocNE:
			s[in.dst] = b2f(s[in.a] != s[in.b])
		case ocAnd:
			s[in.dst] = b2f(s[in.a] != 0 && s[in.b] != 0)
		case ocOr:
			s[in.dst] = b2f(s[in.a] != 0 || s[in.b] != 0)
		case ocNot:
			s[in.dst] = b2f(s[in.a] == 0)
		case ocJmpFalse:
			if s[in.a] == 0 {
				pc = int(in.dst) - 1
			}
		case ocJmp:
			pc = int(in.dst) - 1
		}
	}
}

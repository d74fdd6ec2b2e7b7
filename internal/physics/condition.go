package physics

import (
	"math"
	"sort"
)

// Condition is a standalone boolean expression of the physics language
// over a fixed list of named variables: a scene's custom constraint, such
// as `flash_rate < 0.5 or pressure < 80` or
// `abs(temperature - melt_temperature_setpoint) <= 5 [degC]`.
//
// It is parsed and checked by the language's own parser and checker (same
// grammar, functions, argument counts and number/condition typing as a
// model equation; unit annotations on literals are accepted and not
// converted, as in models). The names it may use are the variables given
// to [ParseCondition], dt (the step length) and pi.
//
// A Condition is immutable and safe for concurrent use.
type Condition struct {
	src   string
	root  *node
	vars  []string
	index map[string]int
	decls map[string]*rawDecl
	refs  []string
	dt    float64
}

// ParseCondition parses src as a condition over vars (dt is the step
// length in seconds that `dt` stands for). Problems are a *core.Error
// with code [CodePhysicsInvalid] and fields "condition:line:col": syntax
// errors, unknown names or functions, wrong argument counts, and an
// expression that is a number rather than a condition.
func ParseCondition(src string, vars []string, dt float64) (*Condition, error) {
	d := &diag{file: "condition", maxProbs: 20}
	c := &Condition{src: src, vars: append([]string(nil), vars...), index: map[string]int{}, decls: map[string]*rawDecl{}, dt: dt}
	for i, v := range vars {
		c.index[v] = i
		c.decls[v] = &rawDecl{kind: KindState, name: v, index: i}
	}
	toks := lex([]byte(src), d)
	if err := d.err(); err != nil {
		return nil, err
	}
	p := &parser{toks: toks, src: []byte(src), d: d, m: &rawModel{}}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(bailout); !ok {
					panic(r)
				}
			}
		}()
		for p.peek().kind == tNewline {
			p.next()
		}
		c.root = p.expr()
		for p.peek().kind == tNewline {
			p.next()
		}
		if t := p.peek(); t.kind != tEOF {
			p.fail(t.pos, "unexpected %s after the condition", t.describe())
		}
	}()
	if err := d.err(); err != nil {
		return nil, err
	}
	ch := c.checker(d)
	if !ch.resolve(c.root, ctxStep, nil) {
		d.errorf(c.root.pos, "a condition must be a comparison or an and/or/not of comparisons, not a number")
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.kind == nRef {
			if _, ok := c.index[n.name]; ok && !seen[n.name] {
				seen[n.name] = true
				c.refs = append(c.refs, n.name)
			}
		}
		for _, a := range n.args {
			walk(a)
		}
	}
	walk(c.root)
	sort.Strings(c.refs)
	return c, nil
}

// checker returns a checker over the condition's names (a fresh one: its
// maps are scratch for one analysis).
func (c *Condition) checker(d *diag) *checker {
	names := make(map[string]*rawDecl, len(c.decls))
	for k, v := range c.decls {
		names[k] = v
	}
	return &checker{d: d, src: []byte(c.src), names: names, byKind: map[Kind][]*rawDecl{}, deps: map[*rawDecl][]*rawDecl{},
		used: map[*rawDecl]bool{}, ivs: map[*rawDecl]ival{}, cmpIv: map[*node][2]ival{}, brokenNames: map[string]bool{},
		dtIv: point(c.dt), m: &rawModel{}}
}

// Source returns the condition's text.
func (c *Condition) Source() string { return c.src }

// Names returns the variables the condition uses, sorted.
func (c *Condition) Names() []string { return append([]string(nil), c.refs...) }

// Holds evaluates the condition at one point: vals[i] is the value of the
// i-th variable given to ParseCondition. A condition that cannot be
// evaluated (a NaN operand, a short vals) does not hold.
func (c *Condition) Holds(vals []float64) bool {
	if len(vals) < len(c.vars) {
		return false
	}
	v := evalNode(c.root, func(n *node) float64 {
		switch n.name {
		case "dt":
			return c.dt
		case "pi":
			return builtinConsts["pi"]
		}
		if i, ok := c.index[n.name]; ok {
			return vals[i]
		}
		return math.NaN()
	})
	return v == 1
}

// HoldsOn evaluates the condition over boxes: variable i may take any
// value in [lo[i], hi[i]]. By the language's interval arithmetic (the
// checker's, conservative except for the rounding of endpoints), always
// reports that the condition holds for every value in the box, possibly
// that it holds for some. A NaN bound or short slices give (false, true):
// nothing is certain.
func (c *Condition) HoldsOn(lo, hi []float64) (always, possibly bool) {
	if len(lo) < len(c.vars) || len(hi) < len(c.vars) {
		return false, true
	}
	ch := c.checker(&diag{file: "condition"})
	for i, name := range c.vars {
		if math.IsNaN(lo[i]) || math.IsNaN(hi[i]) || lo[i] > hi[i] {
			return false, true
		}
		ch.ivs[c.decls[name]] = ival{lo: lo[i], hi: hi[i]}
	}
	r := ch.interval(c.root, nil, false)
	return r.lo >= 1, r.hi >= 1
}

package physics

type nodeKind uint8

const (
	nNum    nodeKind = iota + 1 // number literal, optionally with a unit annotation
	nRef                        // name reference
	nUnary                      // op applied to args[0]
	nBinary                     // op applied to args[0], args[1]
	nCall                       // function call fn(args...)
)

type opKind uint8

const (
	opNone opKind = iota
	opAdd
	opSub
	opMul
	opDiv
	opPow
	opNeg
	opPos
	opLT
	opLE
	opGT
	opGE
	opEQ
	opNE
	opAnd
	opOr
	opNot
)

var opText = [...]string{
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opPow: "^", opNeg: "-", opPos: "+",
	opLT: "<", opLE: "<=", opGT: ">", opGE: ">=", opEQ: "==", opNE: "!=",
	opAnd: "and", opOr: "or", opNot: "not",
}

func (o opKind) isCompare() bool { return o >= opLT && o <= opNE }
func (o opKind) isLogic() bool   { return o == opAnd || o == opOr || o == opNot }

// node is the checked expression AST. Position is the operator's for
// operators, the name's for references and calls, the first character for
// literals.
type node struct {
	kind nodeKind
	op   opKind
	name string // reference or function name
	val  float64
	unit *unitSpec // unit annotation of a literal
	args []*node
	pos  Pos
	off  int // source span [off, end)
	end  int
}

// unitSpec is a unit as written.
type unitSpec struct {
	text  string
	pos   Pos
	u     unit
	any   bool // "?": not checked
	valid bool // false if the text had errors (already reported)
}

// Kind is the role of a declared name.
type Kind uint8

const (
	KindState Kind = iota + 1
	KindControl
	KindDisturbance
	KindParam
	KindConst
	KindLet
	KindObs
	KindGuard
)

var kindNames = [...]string{
	KindState: "state", KindControl: "control", KindDisturbance: "disturbance", KindParam: "param",
	KindConst: "const", KindLet: "let", KindObs: "obs", KindGuard: "guard",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// algebraic reports kinds defined by an expression evaluated every step
// (or, for const, once).
func (k Kind) algebraic() bool {
	return k == KindConst || k == KindLet || k == KindObs || k == KindGuard
}

// rawDecl is a declaration as parsed.
type rawDecl struct {
	kind     Kind
	name     string
	pos      Pos
	unit     *unitSpec
	hasRange bool
	lo, hi   float64 // range or param bounds
	init     *node   // state
	hasDef   bool
	def      float64 // control/disturbance default
	value    float64 // param nominal
	expr     *node   // const/let/obs/guard
	broken   bool    // the statement had a syntax error
	index    int     // index within its kind
}

type rawEq struct {
	continuous bool // d(x) rather than next(x)
	state      string
	kwPos      Pos // position of "next"/"d"
	pos        Pos // position of the state name
	expr       *node
}

type rawModel struct {
	name, version string
	namePos       Pos
	hasModel      bool
	solver        string
	solverPos     Pos
	substeps      int
	substepsPos   Pos
	dt            float64
	hasDt         bool
	dtPos         Pos
	decls         []*rawDecl
	eqs           []*rawEq
}

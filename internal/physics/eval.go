package physics

import "math"

// The runtime semantics of every operation, shared by the compiled
// simulator and the reference AST evaluator so that both agree bit for bit.

func clampF(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

func signF(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	case x == 0:
		return 0
	}
	return x // NaN
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// evalNode evaluates an expression tree directly. ref supplies the value of
// every reference. Conditions evaluate to 1 (true) or 0 (false). It is the
// reference the compiled program is tested against, and folds constants.
func evalNode(n *node, ref func(*node) float64) float64 {
	switch n.kind {
	case nNum:
		return n.val
	case nRef:
		return ref(n)
	case nUnary:
		a := evalNode(n.args[0], ref)
		switch n.op {
		case opNeg:
			return -a
		case opNot:
			return b2f(a == 0)
		}
		return a
	case nBinary:
		a := evalNode(n.args[0], ref)
		b := evalNode(n.args[1], ref)
		switch n.op {
		case opAdd:
			return a + b
		case opSub:
			return a - b
		case opMul:
			return a * b
		case opDiv:
			return a / b
		case opPow:
			return math.Pow(a, b)
		case opLT:
			return b2f(a < b)
		case opLE:
			return b2f(a <= b)
		case opGT:
			return b2f(a > b)
		case opGE:
			return b2f(a >= b)
		case opEQ:
			return b2f(a == b)
		case opNE:
			return b2f(a != b)
		case opAnd:
			return b2f(a != 0 && b != 0)
		case opOr:
			return b2f(a != 0 || b != 0)
		}
	case nCall:
		args := n.args
		if n.name == "if" && len(args) == 3 {
			if evalNode(args[0], ref) != 0 {
				return evalNode(args[1], ref)
			}
			return evalNode(args[2], ref)
		}
		v := make([]float64, len(args))
		for i, a := range args {
			v[i] = evalNode(a, ref)
		}
		bi, ok := builtins[n.name]
		if !ok || len(v) < bi.minArgs || (bi.maxArgs >= 0 && len(v) > bi.maxArgs) {
			return math.NaN()
		}
		switch n.name {
		case "exp":
			return math.Exp(v[0])
		case "log":
			return math.Log(v[0])
		case "sqrt":
			return math.Sqrt(v[0])
		case "abs":
			return math.Abs(v[0])
		case "tanh":
			return math.Tanh(v[0])
		case "sin":
			return math.Sin(v[0])
		case "cos":
			return math.Cos(v[0])
		case "sign":
			return signF(v[0])
		case "min":
			r := v[0]
			for _, x := range v[1:] {
				r = math.Min(r, x)
			}
			return r
		case "max":
			r := v[0]
			for _, x := range v[1:] {
				r = math.Max(r, x)
			}
			return r
		case "clamp":
			return clampF(v[0], v[1], v[2])
		case "pow":
			return math.Pow(v[0], v[1])
		}
	}
	return math.NaN()
}

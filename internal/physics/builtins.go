package physics

import "sort"

// builtin describes a function of the language.
type builtin struct {
	minArgs, maxArgs int // maxArgs < 0: variadic
	doc              string
}

var builtins = map[string]builtin{
	"exp":   {1, 1, "e^x; x must be a pure number"},
	"log":   {1, 1, "natural logarithm; x must be a pure number and > 0"},
	"sqrt":  {1, 1, "square root; halves unit exponents; x must be >= 0"},
	"abs":   {1, 1, "absolute value"},
	"tanh":  {1, 1, "hyperbolic tangent; x must be a pure number"},
	"sin":   {1, 1, "sine (radians); x must be a pure number"},
	"cos":   {1, 1, "cosine (radians); x must be a pure number"},
	"sign":  {1, 1, "-1, 0 or +1; the result is a pure number"},
	"min":   {2, -1, "smallest argument; all arguments in one unit"},
	"max":   {2, -1, "largest argument; all arguments in one unit"},
	"clamp": {3, 3, "clamp(x, lo, hi) = min(max(x, lo), hi) computed as: x<lo → lo, x>hi → hi, else x"},
	"pow":   {2, 2, "pow(x, y) = x^y"},
	"if":    {3, 3, "if(condition, a, b): a when condition holds, else b; only the chosen branch is evaluated"},
}

// builtinConsts are predefined pure numbers.
var builtinConsts = map[string]float64{
	"pi": 3.141592653589793,
}

// keywords are the statement and clause words; they cannot be declared.
var keywords = map[string]bool{
	"model": true, "version": true, "solver": true, "substeps": true,
	"state": true, "control": true, "disturbance": true, "param": true, "const": true,
	"let": true, "obs": true, "guard": true, "next": true, "d": true,
	"unit": true, "range": true, "init": true, "default": true, "in": true,
	"and": true, "or": true, "not": true, "inf": true,
}

// reservedReason returns why name cannot be declared, or "".
func reservedReason(name string) string {
	switch {
	case name == "dt":
		return "it is the step length in seconds"
	case name == "t":
		return "it is reserved for time"
	case builtins[name].minArgs > 0:
		return "it is a function"
	case builtinConsts[name] != 0:
		return "it is a predefined constant"
	case keywords[name]:
		return "it is a keyword"
	}
	return ""
}

// FunctionNames lists the functions of the language, sorted.
func FunctionNames() []string {
	out := make([]string, 0, len(builtins))
	for k := range builtins {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// suggest returns the candidate closest to name by edit distance when it is
// close enough to be a likely typo, or "".
func suggest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := editDistance(name, c)
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	limit := 1 + len(name)/4
	if bestD <= limit {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

package physics

import (
	"fmt"
	"strings"
	"testing"
)

// pathological are inputs that would expose super-linear checks or deep
// recursion: nested conditions, long sums, long let chains, many unknown
// names.
func pathological() map[string]string {
	nestedIf := "x"
	for range 190 {
		nestedIf = "if(x > " + nestedIf + ", 1, 0)"
	}
	var chain strings.Builder
	chain.WriteString("model t\nstate x unit 1 init 0\nlet a0 = x\n")
	for i := 1; i < 5000; i++ {
		fmt.Fprintf(&chain, "let a%d = log(a%d + a%d)\n", i, i-1, i-1)
	}
	chain.WriteString("next(x) = a4999\n")
	var unknown strings.Builder
	unknown.WriteString("model t\nstate x unit 1 init 0\n")
	for i := range 3000 {
		fmt.Fprintf(&unknown, "let v%d = w%d\n", i, i)
	}
	unknown.WriteString("next(x) = x\n")
	return map[string]string{
		"nested if":       "model t\nstate x unit 1 init 0\nnext(x) = " + nestedIf + "\n",
		"long sum":        "model t\nstate x unit 1 init 0\nnext(x) = x" + strings.Repeat(" + x", 100000) + "\n",
		"let chain":       chain.String(),
		"unknown names":   unknown.String(),
		"deep parens":     "model t\nstate x init 0\nnext(x) = " + strings.Repeat("(", 100000) + "\n",
		"nested unary":    "model t\nstate x init 0\nnext(x) = " + strings.Repeat("-", 100000) + "x\n",
		"deep pow":        "model t\nstate x unit m init 0\nnext(x) = x" + strings.Repeat("^1", 10000) + "\n",
		"nested calls":    "model t\nstate x init 0\nnext(x) = " + strings.Repeat("max(x, ", 150) + "x" + strings.Repeat(")", 150) + "\n",
		"many statements": strings.Repeat("state\n", 150000),
	}
}

// TestPathologicalInputs: each pathological input parses or is refused
// without a crash or stack overflow. Their speed is measured by
// BenchmarkParsePathological (no timing assertions in tests).
func TestPathologicalInputs(t *testing.T) {
	for name, src := range pathological() {
		m, err := Parse("m.aml", []byte(src))
		if err == nil && m == nil {
			t.Errorf("%s: nil model", name)
		}
	}
}

// BenchmarkParsePathological times each pathological input (linear checks
// keep each well under a second on one core).
func BenchmarkParsePathological(b *testing.B) {
	for name, src := range pathological() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				_, _ = Parse("m.aml", []byte(src))
			}
		})
	}
}

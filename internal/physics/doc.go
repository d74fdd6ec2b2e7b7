// Package physics implements the AML physics equation language: text files
// (conventionally *.aml) that declare grey-box models of production
// processes — states, controls, disturbances, parameters with prior bounds,
// and the equations that advance the states and compute observations — and
// compiles them into an allocation-free simulator used by training,
// evaluation, prediction and the twin alike. The language reference is
// docs/physics-language.md; examples are in examples/physics/.
//
// # One update rule
//
// Every expression of a step — let, obs, guard, next(x), d(x) — is
// evaluated from the previous step's values (x, u, d, dt), algebraic
// definitions in dependency order. [Sim.Step] returns the new state and
// the outputs of that evaluation: out = h(x, u, d). There is no other
// evaluation order anywhere (training, evaluation, prediction and the twin
// all call Step).
//
// # Pipeline
//
// [Parse] runs, collecting every problem with its file:line:col before
// failing:
//
//  1. lexer (lexer.go): tokens with positions; a statement continues over a
//     line break inside brackets, after an operator or before a line that
//     starts with one;
//  2. parser (parser.go): a hand-written recursive-descent parser for the
//     line statements, the expression grammar and unit expressions;
//  3. checker (check.go): names, reserved words, duplicates, argument
//     counts, number/condition types, equations per state and solver,
//     dependency order and cycles, unit dimensions (units.go), and domains
//     by interval arithmetic (interval.go);
//  4. compiler (compile.go): expressions become a flat register-machine
//     instruction slice over one []float64 of slots (constants folded,
//     `if` compiled to jumps), run by a switch loop (sim.go uses it for
//     discrete, euler and rk4 steps).
//
// # Why a hand-written parser rather than expr-lang/expr
//
// The grammar is small and closed (numbers, names, + - * / ^, comparisons,
// and/or/not, calls to a fixed set of functions), but it needs things
// expr's grammar does not have: unit annotations on literals (0.05 [1/s],
// 0.12 [%/bar] — in expr `[` is indexing and `%` modulo), `^` as a
// right-associative power binding tighter than unary minus, and exact
// line:column positions for every node, including inside multi-line
// statements. Converting expr's much larger AST (strings, maps, closures,
// pipes, member access) would mean rejecting most of it node by node, and
// would add a dependency to go.mod. The parser is about 700 lines, has a
// nesting limit (200 levels), and is fuzzed by FuzzParse, which also
// cross-checks the compiled program against an AST evaluator.
//
// # Errors
//
// Static problems are a *core.Error with code [CodePhysicsInvalid] (HTTP
// 422) whose Problems have Field "file:line:col". A NaN or ±Inf produced
// while stepping is [CodePhysicsNonFinite] (422) with Field naming the
// equation or output. Caller mistakes (vector lengths, parameters outside
// their bounds) are core.CodeInvalidArgument (400).
package physics

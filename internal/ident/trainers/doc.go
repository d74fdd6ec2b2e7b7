// Package trainers registers AML's native (in-process, pure Go) trainers
// with the job system and the model formats they write with the model
// package. Import it for its side effects:
//
//	import _ "github.com/aml-project/aml/internal/ident/trainers"
//
// Every trainer is deterministic for its seed and reports progress; the
// platform, not the trainer, computes the metrics (internal/eval).
package trainers

// Package trainers holds AML's native (in-process, pure Go) trainers and
// the model formats they write. Nothing registers itself: the composition
// root lists them explicitly — All() for the job runner
// (jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats())) and
// Formats() for every model.Load of their artifacts
// (model.LoadOptions.Formats).
//
// Every trainer is deterministic for its seed and reports progress; the
// platform, not the trainer, computes the metrics (internal/eval).
//
// Each trainer publishes the JSON schema of its params (schema.go), from
// which docs/trainers.md is generated.
package trainers

//go:generate go run ./gen -o ../../../docs/trainers.md

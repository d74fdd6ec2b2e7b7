package auth

import (
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// wantStatus is the HTTP status of every code as clients know it. It was
// taken from the per-code statuses before kinds existed (core.StatusFor and
// the Status each package set on its errors); a code's status is part of
// the public contract, so a change here is a breaking change.
var wantStatus = map[string]int{
	"AML_ARTIFACT_TAMPERED":      500,
	"AML_AUDIT_TAMPERED":         409,
	"AML_BINDING_MISMATCH":       422,
	"AML_BODY_TIMEOUT":           400, // the API answers a late body 408, as it answers AML_USAGE 405 for a method
	"AML_CERT_EXPIRED":           410,
	"AML_CERT_INVALID":           422,
	"AML_CERT_KEY_MISMATCH":      409,
	"AML_CERT_REFUSED":           422,
	"AML_CONFLICT":               409,
	"AML_CONTRACT_INVALID":       422,
	"AML_DATASET_EMPTY":          422,
	"AML_DATASET_TAMPERED":       422,
	"AML_FORBIDDEN":              403,
	"AML_GATE_FAILED":            409,
	"AML_INGEST_INVALID":         422,
	"AML_INTERNAL":               500,
	"AML_INVALID_ARGUMENT":       400,
	"AML_IN_USE":                 409,
	"AML_JOB_CONFLICT":           409,
	"AML_JOB_STALLED":            500,
	"AML_JOB_TIMEOUT":            500,
	"AML_MODEL_INVALID":          422,
	"AML_MODEL_TAMPERED":         409,
	"AML_NON_FINITE":             400,
	"AML_NOT_FOUND":              404,
	"AML_OBJECTIVE_TAMPERED":     422,
	"AML_PHYSICS_INVALID":        422,
	"AML_PHYSICS_NON_FINITE":     422,
	"AML_PREDICT_INVALID":        422,
	"AML_QUEUE_FULL":             429,
	"AML_QUOTA_EXCEEDED":         413,
	"AML_RATE_LIMITED":           429,
	"AML_STREAM_LIMIT":           429,
	"AML_CERT_KEY_RETIRED":       409,
	"AML_CLOCK_FAULT":            500,
	"AML_REMOTE_UNSUPPORTED":     500,
	"AML_SCENE_FROZEN":           409,
	"AML_SCHEMA_MISMATCH":        503,
	"AML_SCHEMA_TOO_NEW":         503,
	"AML_SHADOW_MISSING":         409,
	"AML_SNAPSHOT_QUALITY":       422,
	"AML_SNAPSHOT_TAMPERED":      422,
	"AML_SPEC_INVALID":           422,
	"AML_STAGE_RACE":             409,
	"AML_STORE_UNAVAILABLE":      503,
	"AML_TRAINER_FAILED":         500,
	"AML_TRAINER_START_FAILED":   500,
	"AML_TRIAL_TAMPERED":         422,
	"AML_TWIN_GATE_FAILED":       409,
	"AML_LINEAGE_UNVERIFIED":     409,
	"AML_TWIN_MODEL_UNSUPPORTED": 422,
	"AML_TWIN_SCENE_MISMATCH":    422,
	"AML_TWIN_WINDOW_INVALID":    422,
	"AML_UNAUTHENTICATED":        401,
	"AML_USAGE":                  400,
	"AML_WORKER_LOST":            500,
	"AML_WRITE_DENIED":           403,
	"AML_WRITE_FAILED":           502,
	// The line's configured writer could not be reached; nothing written.
	"AML_LINE_WRITER_UNAVAILABLE": 502,
	"ENV_BUSY":                    409,
	"ENV_REBUILD_FAILED":          500,
	"UNIT_CONTRACT_INVALID":       422,

	// A certificate's re-run from a fresh snapshot failed at execution.
	"AML_CERT_REVALIDATION_FAILED": 409,
}

// TestCodeStatuses: every registered code answers with its known status,
// and the table lists exactly the registered codes.
func TestCodeStatuses(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range core.Codes() {
		seen[c.Code] = true
		want, ok := wantStatus[c.Code]
		if !ok {
			t.Errorf("%s (kind %s) is not in wantStatus: add it with HTTP %d if that is right", c.Code, c.Kind, HTTPStatus(c.Kind))
			continue
		}
		if got := HTTPStatus(c.Kind); got != want {
			t.Errorf("%s: kind %s maps to HTTP %d, clients know it as %d", c.Code, c.Kind, got, want)
		}
		if got := StatusOf(&core.Error{Code: c.Code, Message: "x"}); got != want {
			t.Errorf("StatusOf(%s error) = %d, want %d", c.Code, got, want)
		}
	}
	for code := range wantStatus {
		if !seen[code] {
			t.Errorf("%s is in wantStatus but not registered", code)
		}
	}
}

// TestKindStatuses: every kind has its own entry in the mapping.
func TestKindStatuses(t *testing.T) {
	for _, k := range core.Kinds() {
		if _, ok := kindStatus[k]; !ok {
			t.Errorf("kind %s has no HTTP status", k)
		}
	}
	if len(kindStatus) != len(core.Kinds()) {
		t.Errorf("kindStatus maps %d kinds, core has %d", len(kindStatus), len(core.Kinds()))
	}
	if got := StatusOf(errString("plain")); got != 500 {
		t.Errorf("StatusOf(plain error) = %d, want 500", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

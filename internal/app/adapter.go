package app

import (
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/envelope"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// The names the interfaces use for the ops' response types and request
// defaults that the domain packages define. An adapter (the CLI, the web)
// names them here and never imports the package that does the work
// (internal/archtest's TestWebImportsNoDomainWork and
// TestCLIImportsNoDomainWork), so it cannot compute, decide, sign or
// verify beside the op. They are aliases: the JSON on every surface is the
// domain type's.

// Responses (and the parts of them adapters read).
type (
	// CertVerifyReport is cert.verify's answer.
	CertVerifyReport = govern.VerifyReport
	// CertExecuteResult is cert.execute's answer.
	CertExecuteResult = govern.Result
	// EnvelopeCycleResult is envelope.cycle's answer.
	EnvelopeCycleResult = envelope.CycleResult
	// TrialDetail is every trace of a trial (trial.run, trial.recompute).
	TrialDetail = engine.TrialDetail
	// TrialTrace is one quantity's trace in a TrialDetail.
	TrialTrace = engine.Trace
	// TwinGateReport is a twin gate evaluation's report (gate.latest).
	TwinGateReport = eval.TwinGateReport
	// TwinProfile is a twin acceptance profile (gate.profiles).
	TwinProfile = eval.TwinProfile
	// GateReport is a model's acceptance gate report as stored with the
	// model and its job (model.show, job.show: Gates).
	GateReport = eval.GateReport
	// Conformal is the conformal calibration in a model's metrics
	// (model.show: Metrics.conformal).
	Conformal = eval.Conformal
)

// Request defaults and enumerations.
const (
	// DefaultCertTTL is cert.issue's certificate lifetime when none is
	// given.
	DefaultCertTTL = cert.DefaultTTL
	// ModeSafeSmallStep and ModePreciseSearch are OptimizeRequest.Mode's
	// values besides ModeAuto.
	ModeSafeSmallStep = engine.ModeSafeSmallStep
	ModePreciseSearch = engine.ModePreciseSearch
	// DefaultGateSnapshots is gate.evaluate's replayed snapshots when none
	// are given.
	DefaultGateSnapshots = gate.DefaultSnapshots
	// DefaultJobTimeout and DefaultJobStall are job.submit's limits when
	// none are given.
	DefaultJobTimeout = jobs.DefaultTimeout
	DefaultJobStall   = jobs.DefaultStall
	// StepTestRunning is a step test's status while its execution runs
	// in the background (steptest.execute, steptest.show's Progress).
	StepTestRunning = steptest.StatusRunning
)

package trainers

import (
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/trainer"
)

// The native trainers' param schemas (trainer.Described), inferred once
// from their params structs: a field's jsonschema tag is its description,
// its param tag its default and range (trainer.ParamSchema). job.submit
// validates a job's params against them; trainer.show and
// docs/trainers.md (go generate ./internal/ident/trainers) present them.

var (
	arxSchema    = sync.OnceValue(trainer.MustParamSchema[arxParams])
	ssSchema     = sync.OnceValue(trainer.MustParamSchema[ssParams])
	staticSchema = sync.OnceValue(trainer.MustParamSchema[staticParams])
	hybridSchema = sync.OnceValue(trainer.MustParamSchema[hybridParams])
	procSchema   = sync.OnceValue(trainer.MustParamSchema[processParams])
)

// Every native trainer describes itself.
var (
	_ trainer.Described = OneStep{}
	_ trainer.Described = LinearStateSpace{}
	_ trainer.Described = StaticResponse{}
	_ trainer.Described = HybridResidual{}
	_ trainer.Described = ProcessModel{}
)

func (OneStep) Summary() string {
	return "MIMO ARX model by ridge least squares over the train runs' NaN-free segments, optionally selecting the structure by validation"
}
func (OneStep) Formats() []string               { return []string{FormatARX} }
func (OneStep) ParamSchema() *jsonschema.Schema { return arxSchema() }

func (LinearStateSpace) Summary() string {
	return "discrete-time state-space model by multi-experiment PO-MOESP, with stability enforcement and prediction-error refinement"
}
func (LinearStateSpace) Formats() []string               { return []string{FormatStateSpace} }
func (LinearStateSpace) ParamSchema() *jsonschema.Schema { return ssSchema() }

func (StaticResponse) Summary() string {
	return "ridge-regularised polynomial response surface (or a Gaussian process if it wins the cross-validation) for static_response datasets; the twin runs its models (each step predicted from that step's settings)"
}
func (StaticResponse) Formats() []string               { return []string{FormatStatic} }
func (StaticResponse) ParamSchema() *jsonschema.Schema { return staticSchema() }

func (HybridResidual) Summary() string {
	return "physics model calibrated on the free-run simulation error plus a bounded neural residual ensemble"
}
func (HybridResidual) Formats() []string               { return []string{FormatHybrid} }
func (HybridResidual) ParamSchema() *jsonschema.Schema { return hybridSchema() }

func (ProcessModel) Summary() string {
	return "FOPDT, SOPDT or IPDT response per control→target pair (K, time constants, dead time with 95% confidence intervals) by simulation-error minimisation"
}
func (ProcessModel) Formats() []string               { return []string{FormatProcess} }
func (ProcessModel) ParamSchema() *jsonschema.Schema { return procSchema() }

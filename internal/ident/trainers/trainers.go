package trainers

import (
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// All returns the native trainers: one_step@1, linear_state_space@1,
// output_error@1, armax@1, box_jenkins@1, static_response@1,
// hybrid_residual@1, process_model@1, static_forest@1, narx_mlp@1 and
// neural_state_space@1.
func All() []trainer.Trainer {
	return []trainer.Trainer{OneStep{}, LinearStateSpace{}, OutputError{}, ARMAX{}, BoxJenkins{}, StaticResponse{}, HybridResidual{}, ProcessModel{}, StaticForest{}, NARXMLP{}, NeuralStateSpace{}}
}

// Formats returns the model formats the native trainers write, by name,
// with the loader of each: the table model.Load is given
// (model.LoadOptions.Formats) to read their artifacts.
func Formats() map[string]model.FormatLoader {
	return map[string]model.FormatLoader{
		FormatARX:        loadARX,
		FormatStateSpace: loadStateSpace,
		FormatStatic:     loadStatic,
		FormatHybrid:     loadHybrid,
		FormatOE:         loadOE,
		FormatProcess:    loadProcess,
		FormatARMAX:      loadARMAX,
		FormatBJ:         loadBJ,
		FormatForest:     loadForest,
		FormatNARX:       loadNARX,
		FormatNSS:        loadNSS,
	}
}

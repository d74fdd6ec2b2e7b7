package app

import (
	"context"
	"errors"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// dataset.check: a dataset spec checked the way dataset.build decodes
// and validates it (the strict spec parser, DatasetBuildRequest.Validate,
// the server's work budget) without reading a sample or storing anything.
// The answer carries every problem instead of failing, so a form can show
// them as the user types (the web UI's dataset form calls it on each
// edit).

var opDatasetCheck = Op{Name: "dataset.check", Act: auth.ActRead, Summary: "Check a dataset spec as dataset.build would (strict parser, every validation rule, the work budget) without building or storing anything"}

func checkOps() []*Op {
	return []*Op{bind(&opDatasetCheck, (*App).DatasetCheck)}
}

// DatasetCheckRequest is dataset.build's request, checked only. A spec
// the strict parser refuses is not a failed call: the refusal is the
// answer's problems.
type DatasetCheckRequest struct {
	Spec        dataset.Spec `json:"spec,omitempty" jsonschema:"the dataset spec (docs/dataset-format.md); an empty one is answered with its problems"`
	MaxWindows  int          `json:"maxWindows,omitempty" jsonschema:"refuse more windows than this (default and at most the server's quota, 200000 unless configured)"`
	MaxBytesMiB int          `json:"maxBytesMiB,omitempty" jsonschema:"refuse a larger dataset (MiB; default and at most the server's quota, 4096 unless configured)"`
	MaxCells    int64        `json:"maxCells,omitempty" jsonschema:"work budget (grid cells), at most the server's"`

	decodeErr error // what the strict parser refused
}

// UnmarshalJSON decodes through dataset.build's own request decoding
// (DatasetBuildRequest.UnmarshalJSON); a refusal with a code is kept for
// the answer.
func (r *DatasetCheckRequest) UnmarshalJSON(b []byte) error {
	var br DatasetBuildRequest
	err := br.UnmarshalJSON(b)
	var ae *core.Error
	switch {
	case err == nil:
		*r = DatasetCheckRequest{Spec: br.Spec, MaxWindows: br.MaxWindows, MaxBytesMiB: br.MaxBytesMiB, MaxCells: br.MaxCells}
	case errors.As(err, &ae):
		*r = DatasetCheckRequest{decodeErr: err}
	default:
		return err
	}
	return nil
}

// DatasetCheckResponse says whether dataset.build would accept the spec,
// and every problem when not.
type DatasetCheckResponse struct {
	OK       bool           `json:"ok"`
	Code     string         `json:"code,omitempty" jsonschema:"the error code dataset.build would answer"`
	Message  string         `json:"message"`
	Problems []core.Problem `json:"problems"`
	// Spec is the spec as dataset.build would build it (normalised).
	Spec *dataset.Spec `json:"spec,omitempty"`
}

// DatasetCheck checks a dataset spec without building it.
func (a *App) DatasetCheck(ctx context.Context, p Principal, req DatasetCheckRequest) (DatasetCheckResponse, error) {
	return run(ctx, a, p, &opDatasetCheck, req, func(ctx context.Context, p Principal, req DatasetCheckRequest) (DatasetCheckResponse, error) {
		err := req.decodeErr
		br := DatasetBuildRequest{Spec: req.Spec, MaxWindows: req.MaxWindows, MaxBytesMiB: req.MaxBytesMiB, MaxCells: req.MaxCells}
		if err == nil {
			if err = scope(p, auth.ActRead, req.Spec.LineID); err != nil {
				return DatasetCheckResponse{}, err
			}
			err = br.Validate()
		}
		if err == nil {
			_, _, err = a.datasetQuotas(p, req.MaxWindows, req.MaxBytesMiB)
		}
		if err == nil {
			_, err = a.datasetCells(req.MaxCells)
		}
		if err != nil {
			return CheckAnswer(err), nil
		}
		return DatasetCheckResponse{OK: true, Message: "The spec is valid.", Problems: []core.Problem{}, Spec: &br.Spec}, nil
	})
}

// CheckAnswer is err as a check's answer: its code, message and every
// problem (one for an error without a list).
func CheckAnswer(err error) DatasetCheckResponse {
	out := DatasetCheckResponse{Code: core.CodeOf(err), Message: err.Error(), Problems: []core.Problem{}}
	var ae *core.Error
	if errors.As(err, &ae) {
		out.Message = ae.Message
		out.Problems = append(out.Problems, ae.Problems...)
		if len(out.Problems) == 0 {
			out.Problems = append(out.Problems, core.Problem{Field: ae.Field, Message: ae.Message})
		}
	} else {
		out.Problems = append(out.Problems, core.Problem{Message: err.Error()})
	}
	return out
}

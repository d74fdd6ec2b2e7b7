package benefit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"time"

	"github.com/aml-project/aml/examples"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
)

// Mode names.
const (
	ModeFixed    = "fixed"
	ModePerMove  = "per_move"
	ModeEnvelope = "envelope"
	ModeOracle   = "oracle"
)

// People of the study: the engineer requests, the approver approves.
const (
	Engineer = "study-engineer"
	Approver = "study-approver"
)

// Options configure [Run]; zero values take the defaults.
type Options struct {
	// Store is a fresh store (no runs yet), DataDir its data directory,
	// Trainers the native trainers: the twin's model is trained there.
	Store    store.Store
	DataDir  string
	Trainers *jobs.Trainers
	// Logf prints progress lines (nil: silent).
	Logf func(format string, args ...any)

	Seed uint64 // default 7
	Runs int    // study runs per mode, default 60 (1..500)
	// Wear lets the unmeasured mould wear grow run by run; MaterialLots
	// gives every run a new material lot.
	Wear, MaterialLots bool
	// HistoryRuns are the runs (generator, with its excitation schedule)
	// the twin's model is trained on, default 24; the study's runs
	// continue the line's age after them.
	HistoryRuns int
	// RunSteps is a study run's length in 1 s steps (default 600),
	// CycleSteps the controllers' cycle (default 60: the write policy's
	// minimum node interval).
	RunSteps, CycleSteps int
	// ApprovalDelaySteps is how long a person takes to approve a move in
	// per_move mode (default 300).
	ApprovalDelaySteps int
	// MaxMovesPerHour is the envelope's rate (default 30).
	MaxMovesPerHour int
	// SpecHalfWidth is the spec band's half-width around the target
	// (default 0.3 g).
	SpecHalfWidth float64
	// Retrains is how many recalibrations the envelope mode carries out
	// (retrain and twin gate, default 1; later triggers are counted
	// only), ShadowRuns how many study runs after a new model its shadow
	// evidence and gate wait for (default 3).
	Retrains, ShadowRuns int
	// RecalWindow is how many of the line's most recent ended runs a
	// recalibration retrains on (default 12; -1: all of them, the
	// recalibration scheduler's own rebuild, recal.RunNext).
	RecalWindow int
	// RecalMinRuns is how many study runs the line must have stored
	// before a trigger is carried out as a recalibration (default 6;
	// earlier triggers are counted only).
	RecalMinRuns int
}

// ModeResult is one mode's outcome.
type ModeResult struct {
	Name string `json:"name"`
	// MeanAbsError is the mean over runs of |run-mean measured part
	// weight − target| (g).
	MeanAbsError float64 `json:"meanAbsError"`
	// InSpecFraction is the share of measured part-weight samples inside
	// the spec band.
	InSpecFraction float64 `json:"inSpecFraction"`
	// Violations counts samples whose true values leave a hard_range
	// constraint of the scene.
	Violations int `json:"violations"`
	Approvals  int `json:"approvals"`
	Writes     int `json:"writes"`
	// RecalibrationTriggers counts the runs at whose end the
	// recalibration scheduler's disturbance trigger fired (every mode
	// runs the twin's drift estimate, so every governed mode counts
	// them); Recalibrations the retrains carried out that produced a new
	// model (envelope mode only, at most Options.Retrains: the others
	// count triggers, never retrain).
	RecalibrationTriggers int `json:"recalibrationTriggers"`
	Recalibrations        int `json:"recalibrations"`
	// Refused counts the twin's proposals the governed path refused:
	// per_move the certificates the guard (or the store's issue, the
	// approval) denied, envelope the guard's OUTSIDE_ENVELOPE.
	Refused int `json:"refused"`
	// per_move: Certificates are the recommendation certificates issued,
	// Denials the denied ones by reason (guard.Reason*, govern.Reason*,
	// CERT_REFUSED at issue).
	Certificates int            `json:"certificates,omitempty"`
	Denials      map[string]int `json:"denials,omitempty"`
	// Governed modes: Moves are the control moves written (a write may
	// move several controls), AuditedMoves the node writes the audit log
	// records for the line in the mode's span. Envelope mode: OutsideEnvelope the written moves whose
	// target or read-back lies outside the approved envelope's bounds
	// (checked against the envelope loaded from its signed trail), Held
	// the cycles that held, Stops the supervisor's stops by reason (each
	// followed by a new envelope a person approved).
	Moves           int            `json:"moves,omitempty"`
	AuditedMoves    int            `json:"auditedMoves,omitempty"`
	OutsideEnvelope int            `json:"writesOutsideEnvelope"`
	Held            int            `json:"held,omitempty"`
	Stops           map[string]int `json:"stops,omitempty"`
	// RunMeans are the run-mean measured part weights, MaxDrift the
	// largest |drift estimate| the twin reported (g).
	RunMeans []float64 `json:"runMeans"`
	MaxDrift float64   `json:"maxDriftEstimate,omitempty"`
	// RecalibrationDetails (envelope mode, which stores its runs) are the
	// recalibrations carried out: trigger, run, the new model and its
	// twin gate on its shadow evidence (see Recalibration).
	RecalibrationDetails []Recalibration `json:"recalibrationDetails,omitempty"`
}

// Result is the study's report.
type Result struct {
	Seed         uint64  `json:"seed"`
	Runs         int     `json:"runs"`
	RunSteps     int     `json:"runSteps"`
	Wear         bool    `json:"wear"`
	MaterialLots bool    `json:"materialLots"`
	Target       float64 `json:"target"`
	SpecLow      float64 `json:"specLow"`
	SpecHigh     float64 `json:"specHigh"`
	// NoiseSD is the part-weight sensor's noise (g) and NoiseFloor what it
	// leaves on a run mean, NoiseSD/√RunSteps.
	NoiseSD    float64 `json:"noiseSd"`
	NoiseFloor float64 `json:"noiseFloor"`
	ModelID    string  `json:"modelId"`
	// TestRMSE is the model's test RMSE on the part weight (g).
	TestRMSE float64      `json:"testRmse"`
	Modes    []ModeResult `json:"modes"`
	// EnvelopeShare is the envelope mode's share of the oracle's reduction
	// of MeanAbsError relative to fixed: (fixed − envelope)/(fixed −
	// oracle); PerMoveShare the same for per_move.
	EnvelopeShare float64 `json:"envelopeShare"`
	PerMoveShare  float64 `json:"perMoveShare"`
	Seconds       float64 `json:"seconds"`
}

// Mode returns the named mode's result (nil when absent).
func (r *Result) Mode(name string) *ModeResult {
	for i := range r.Modes {
		if r.Modes[i].Name == name {
			return &r.Modes[i]
		}
	}
	return nil
}

func (o *Options) defaults() error {
	if o.Seed == 0 {
		o.Seed = 7
	}
	if o.Runs == 0 {
		o.Runs = 60
	}
	if o.HistoryRuns == 0 {
		o.HistoryRuns = 24
	}
	if o.RunSteps == 0 {
		o.RunSteps = 600
	}
	if o.CycleSteps == 0 {
		o.CycleSteps = 60
	}
	if o.ApprovalDelaySteps == 0 {
		o.ApprovalDelaySteps = 300
	}
	if o.MaxMovesPerHour == 0 {
		o.MaxMovesPerHour = 30
	}
	if o.SpecHalfWidth == 0 {
		o.SpecHalfWidth = 0.3
	}
	if o.Retrains == 0 {
		o.Retrains = 1
	}
	if o.ShadowRuns == 0 {
		o.ShadowRuns = 3
	}
	if o.RecalWindow == 0 {
		o.RecalWindow = -1
	}
	if o.RecalMinRuns == 0 {
		o.RecalMinRuns = 6
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch {
	case o.Runs < 1 || o.Runs > 500:
		return core.FieldErrorf(core.CodeUsage, "runs", "--runs must be 1..500, got %d", o.Runs)
	case o.HistoryRuns < 12 || o.HistoryRuns > 200:
		return core.FieldErrorf(core.CodeUsage, "historyRuns", "history runs must be 12..200, got %d", o.HistoryRuns)
	case o.RunSteps < 120 || o.RunSteps > 7200:
		return core.FieldErrorf(core.CodeUsage, "runSteps", "run steps must be 120..7200, got %d", o.RunSteps)
	case o.CycleSteps < 60 || o.CycleSteps > o.RunSteps:
		return core.FieldErrorf(core.CodeUsage, "cycleSteps", "the cycle must be 60 steps (the write policy's interval) up to a run, got %d", o.CycleSteps)
	case o.ApprovalDelaySteps < 0 || o.MaxMovesPerHour < 1 || !(o.SpecHalfWidth > 0):
		return core.FieldErrorf(core.CodeUsage, "options", "approval delay ≥ 0, moves per hour ≥ 1 and a positive spec band are required")
	case o.Retrains < 0 || o.Retrains > 5 || o.ShadowRuns < 1 || o.ShadowRuns > 20 || o.RecalWindow < -1 || (o.RecalWindow > 0 && o.RecalWindow < 8):
		return core.FieldErrorf(core.CodeUsage, "options", "retrains must be 0..5, shadow runs 1..20 and the recalibration window -1 (all runs) or at least 8 runs")
	}
	return nil
}

// StudyScene is the scene the study's twin runs: the built-in injection
// scene (schema 2) with the mould wear declared as an unmeasured
// disturbance on the part weight (integrated white noise).
func StudyScene() *contract.SceneContract {
	sc := contract.DefaultInjectionScene()
	sc.SchemaVersion = 2
	walk, maxAbs := 0.002, 1.5
	sc.UnmeasuredDisturbances = []contract.UnmeasuredDisturbance{{ID: "mould_wear", Target: "weight", Model: contract.DisturbanceIntegratedWhiteNoise,
		PhysicalMeaning: "unmeasured mould wear: part weight bias", PriorSD: 1, ProcessSDPerStep: &walk, MaxAbs: &maxAbs}}
	return sc
}

// Run trains the twin on the line's history and runs the four modes.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	tw, testRMSE, gatePassed, gateWhy, err := train(ctx, o)
	if err != nil {
		return nil, err
	}
	scene := StudyScene()
	obj := contract.DefaultInjectionObjective()
	gov, err := newGovernor(ctx, o, scene, obj, tw.ModelID(), gatePassed, gateWhy)
	if err != nil {
		return nil, err
	}
	target := obj.Targets["weight"]
	res := &Result{Seed: o.Seed, Runs: o.Runs, RunSteps: o.RunSteps, Wear: o.Wear, MaterialLots: o.MaterialLots, Target: target,
		SpecLow: target - o.SpecHalfWidth, SpecHigh: target + o.SpecHalfWidth, NoiseSD: sim.SensorNoiseSD()[sim.NodePartWeight],
		ModelID: tw.ModelID(), TestRMSE: testRMSE}
	res.NoiseFloor = res.NoiseSD / math.Sqrt(float64(o.RunSteps))
	for i, name := range []string{ModeFixed, ModePerMove, ModeEnvelope, ModeOracle} {
		m, err := runMode(ctx, o, i, name, tw, scene, obj, testRMSE, gov)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", name, err)
		}
		if name == ModeEnvelope || name == ModePerMove {
			if m.AuditedMoves, err = gov.auditedWrites(ctx, modeBaseMs(o, i), modeBaseMs(o, i+1)); err != nil {
				return nil, err
			}
		}
		o.Logf("   %-9s mean |run mean − %.1f g| %.4f g, in spec %.1f%%, violations %d, approvals %d, writes %d, recalibration triggers %d, recalibrations %d",
			name, target, m.MeanAbsError, 100*m.InSpecFraction, m.Violations, m.Approvals, m.Writes, m.RecalibrationTriggers, m.Recalibrations)
		res.Modes = append(res.Modes, *m)
	}
	fx, or := res.Mode(ModeFixed).MeanAbsError, res.Mode(ModeOracle).MeanAbsError
	if d := fx - or; d > 0 {
		res.EnvelopeShare = (fx - res.Mode(ModeEnvelope).MeanAbsError) / d
		res.PerMoveShare = (fx - res.Mode(ModePerMove).MeanAbsError) / d
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// train simulates the history, builds the dataset and trains the hybrid
// twin (as `aml demo` does), and loads it.
func train(ctx context.Context, o Options) (*engine.Twin, float64, bool, string, error) {
	s := o.Store
	existing, err := s.ListRuns(ctx, core.RunFilter{})
	if err != nil {
		return nil, 0, false, "", err
	}
	if len(existing) > 0 {
		return nil, 0, false, "", core.FieldErrorf(core.CodeConflict, "data", "the data dir %s already holds %d runs: the benefit study needs a fresh one (use --data DIR)", o.DataDir, len(existing))
	}
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = o.HistoryRuns, o.Seed
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		return nil, 0, false, "", err
	}
	if _, err := out.Write(ctx, s, nil); err != nil {
		return nil, 0, false, "", err
	}
	o.Logf("1. simulated %d history runs of the injection line", len(out.Runs))
	raw, err := fs.ReadFile(examples.FS, "specs/injection_weight.json")
	if err != nil {
		return nil, 0, false, "", err
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		return nil, 0, false, "", err
	}
	ds, err := dataset.Build(ctx, s, spec, dataset.Options{DataDir: o.DataDir})
	if err != nil {
		return nil, 0, false, "", err
	}
	phys, err := fs.ReadFile(examples.FS, "physics/injection.aml")
	if err != nil {
		return nil, 0, false, "", err
	}
	// the trainer reads the physics from a file of the data directory
	pf := filepath.Join(o.DataDir, "benefit-injection.aml")
	if err := writeFile(pf, phys); err != nil {
		return nil, 0, false, "", err
	}
	// the model is made an hour before the study's first run (its shadow
	// evidence is the stored study runs that ended after it)
	made := time.UnixMilli(studyStartMs).Add(-time.Hour).UTC()
	r := jobs.NewRunner(s, jobs.Options{DataDir: o.DataDir, Trainers: o.Trainers, Bus: events.New(), Now: func() time.Time { return made }})
	params, _ := json.Marshal(map[string]any{"physics": pf, "mapping": map[string]any{"outputs": map[string]string{"weight": "part_weight"}}})
	j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: "hybrid_residual@1", Seed: 1, Params: params})
	if err != nil {
		return nil, 0, false, "", err
	}
	o.Logf("2. dataset %s; training hybrid_residual@1 (job %s) …", ds.Dataset.ID, j.ID)
	if err := r.Run(ctx, j.ID, 0); err != nil {
		return nil, 0, false, "", err
	}
	if j, err = s.GetJob(ctx, j.ID); err != nil {
		return nil, 0, false, "", err
	}
	if j.Status != core.JobDone || j.ModelID == "" {
		return nil, 0, false, "", core.Errorf(core.CodeInternal, "training job %s ended %s: %s", j.ID, j.Status, j.Error)
	}
	var met struct {
		Test struct {
			Targets []struct {
				RMSE float64 `json:"rmse"`
			} `json:"targets"`
		} `json:"test"`
	}
	_ = json.Unmarshal(j.Metrics, &met)
	testRMSE := math.NaN()
	if len(met.Test.Targets) > 0 {
		testRMSE = met.Test.Targets[0].RMSE
	}
	tw, err := engine.Load(ctx, s, o.DataDir, j.ModelID)
	if err != nil {
		return nil, 0, false, "", err
	}
	o.Logf("3. model %s (test RMSE %.3f g); running %d runs of %d s in each mode", j.ModelID, testRMSE, o.Runs, o.RunSteps)
	why := ""
	if !j.GatePassed {
		why = fmt.Sprintf("model %s did not pass its evaluation gate (%s)", j.ModelID, j.GateProfile)
	}
	return tw, testRMSE, j.GatePassed, why, nil
}

// hardRanges are the scene's hard_range constraints on quantities the
// line measures, by node column (ClosedNodes order).
type hardRange struct {
	col    int
	lo, hi float64
}

func sceneRanges(sc *contract.SceneContract) []hardRange {
	node := map[string]string{"weight": sim.NodePartWeight, "pressure": sim.NodeCavityPressure, "temperature": sim.NodeMeltTemperature}
	col := map[string]int{}
	for j, n := range sim.ClosedNodes() {
		col[n] = j
	}
	var out []hardRange
	for _, c := range sc.Constraints {
		if c.Kind != contract.KindHardRange {
			continue
		}
		n := c.Variable
		if m, ok := node[n]; ok {
			n = m
		}
		j, ok := col[n]
		if !ok {
			continue
		}
		h := hardRange{col: j, lo: math.Inf(-1), hi: math.Inf(1)}
		if c.Min != nil {
			h.lo = *c.Min
		}
		if c.Max != nil {
			h.hi = *c.Max
		}
		out = append(out, h)
	}
	return out
}

// nominal are the recipe's setpoints.
func nominal() sim.Controls {
	p := sim.RecipeParams()
	get := func(id string) float64 { return p[id].(map[string]any)["nominal"].(float64) }
	return sim.Controls{HoldPressure: get(sim.NodeHoldPressure), HoldTime: get(sim.NodeHoldTime), MeltTemperatureSetpoint: get(sim.NodeMeltTemperatureSetpoint)}
}

// Report writes the study's terminal report.
func (r *Result) Report(w io.Writer) {
	fmt.Fprintf(w, "\nbenefit study: %d runs of %d s per mode, seed %d, wear %v, material lots %v (%.1f s)\n", r.Runs, r.RunSteps, r.Seed, r.Wear, r.MaterialLots, r.Seconds)
	fmt.Fprintf(w, "  target %.1f g, spec band %.2f–%.2f g; part weight sensor noise %.3f g (noise floor of a run mean %.4f g); model %s, test RMSE %.3f g\n",
		r.Target, r.SpecLow, r.SpecHigh, r.NoiseSD, r.NoiseFloor, r.ModelID, r.TestRMSE)
	fmt.Fprintf(w, "  %-9s %14s %8s %10s %9s %6s %8s %14s\n", "mode", "mean|err| g", "in spec", "violations", "approvals", "writes", "triggers", "recalibrations")
	for _, m := range r.Modes {
		fmt.Fprintf(w, "  %-9s %14.4f %7.1f%% %10d %9d %6d %8d %14d\n", m.Name, m.MeanAbsError, 100*m.InSpecFraction, m.Violations, m.Approvals, m.Writes, m.RecalibrationTriggers, m.Recalibrations)
	}
	fmt.Fprintf(w, "  share of the oracle's reduction against the fixed recipe: envelope %.0f %%, per move %.0f %%\n", 100*r.EnvelopeShare, 100*r.PerMoveShare)
}

package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/benefit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/safefile"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// The benefit study (internal/benefit, issue 21 item 4) as a platform use
// case: benefit.run starts a study in the background (or, with wait, runs
// it in the call) after every limit is checked, benefit.show follows it
// and shows its report, benefit.list lists the studies kept. A study is
// simulation only: it trains its own twin in a scratch SQLite store under
// the data directory (the study needs a fresh store; the platform's store
// is never touched), writes nothing to a machine, and keeps its report in
// <data>/benefit/<id>/study.json; the scratch store is removed when the
// study ends. The request names no path: the server chooses every one.
//
// A study is for a line: benefit.run needs the job right on that line
// (role and line scope) and the line to exist (AML_NOT_FOUND, checked
// after the scope so a caller learns nothing of lines outside it); the
// record keeps the line, benefit.list lists only the studies of the
// caller's lines, and benefit.show of another line's study is refused
// like any other line's object (AML_FORBIDDEN on lineId, naming none of
// it). A record without a line (kept before studies had one) is shown to
// callers of every line only.
//
// Limits, checked before work starts: runs 1..MaxBenefitRuns, one study
// at a time in a process (a second is AML_QUEUE_FULL), a data directory
// and the native trainers present. A running study writes its record
// with a heartbeat every benefitBeat; a record left running whose
// heartbeat is older than benefitStale (its process ended) reads as
// interrupted.

// MaxBenefitRuns is the most study runs per mode a request may ask for.
const MaxBenefitRuns = 200

// Study statuses.
const (
	BenefitRunning     = "running"
	BenefitDone        = "done"
	BenefitFailed      = "failed"
	BenefitInterrupted = "interrupted"
)

const (
	benefitBeat   = 10 * time.Second
	benefitStale  = 2 * time.Minute
	benefitMaxRec = 16 << 20 // a study record on disk
	// benefitPhases are the progress lines benefit.Run prints: history,
	// training, model, then one per mode.
	benefitPhases = 7
)

var (
	opBenefitRun  = Op{Name: "benefit.run", Act: auth.ActJob, Summary: "Start a benefit study: one simulated line under four controllers (fixed recipe, twin per move, twin in a supervised envelope, oracle); simulation only, its report kept for benefit.show"}
	opBenefitShow = Op{Name: "benefit.show", Act: auth.ActRead, Summary: "A benefit study: status and progress while it runs, then its report (per mode: mean |run-mean − target|, in-spec fraction, violations, approvals, writes, recalibration triggers, recalibrations carried out; run means per run)"}
	opBenefitList = Op{Name: "benefit.list", Act: auth.ActRead, Summary: "List the benefit studies kept, newest first (without their per-run series)"}
)

func benefitOps() []*Op {
	return []*Op{
		bind(&opBenefitRun, (*App).BenefitRun),
		bind(&opBenefitShow, (*App).BenefitShow),
		bind(&opBenefitList, (*App).BenefitList),
	}
}

// BenefitRunRequest starts a benefit study.
type BenefitRunRequest struct {
	Line         string `json:"line" jsonschema:"the line the study is for (in the caller's scope; it must exist)"`
	Runs         int    `json:"runs,omitempty" jsonschema:"study runs per mode, 1..200 (default 60)"`
	Seed         uint64 `json:"seed,omitempty" jsonschema:"seed of the simulated line (default 7)"`
	Wear         bool   `json:"wear,omitempty" jsonschema:"the unmeasured mould wear keeps growing run by run"`
	MaterialLots bool   `json:"materialLots,omitempty" jsonschema:"every run gets a new material lot"`
	Wait         bool   `json:"wait,omitempty" jsonschema:"run the study in the call and answer when it ends (default: start it and answer at once)"`
}

// Validate requires the line and checks the runs cap.
func (r *BenefitRunRequest) Validate() error {
	if err := required("line", r.Line); err != nil {
		return err
	}
	if err := core.CheckID("line", r.Line); err != nil {
		return err
	}
	if r.Runs < 0 || r.Runs > MaxBenefitRuns {
		return core.FieldErrorf(core.CodeInvalidArgument, "runs", "runs must be 1..%d, got %d", MaxBenefitRuns, r.Runs)
	}
	return nil
}

// BenefitStudy is a study's record: what was asked, its progress and,
// when done, its report.
type BenefitStudy struct {
	ID           string    `json:"id"`
	Line         string    `json:"line" jsonschema:"the line the study is for"`
	Status       string    `json:"status" jsonschema:"running, done, failed or interrupted (its process ended)"`
	Runs         int       `json:"runs"`
	Seed         uint64    `json:"seed"`
	Wear         bool      `json:"wear"`
	MaterialLots bool      `json:"materialLots"`
	RequestedBy  string    `json:"requestedBy"`
	CreatedAt    time.Time `json:"createdAt"`
	// UpdatedAt is the heartbeat of a running study (wall clock).
	UpdatedAt  time.Time  `json:"updatedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Stage is the last progress line, Progress the share of the study's
	// phases done (history, training, model, the four modes).
	Stage    string          `json:"stage,omitempty"`
	Progress float64         `json:"progress"`
	Error    *auth.ErrorBody `json:"error,omitempty"`
	// Report is the study's result (benefit.Result; `aml demo --benefit
	// --json` prints the same object), when done.
	Report *benefit.Result `json:"report,omitempty"`
}

// BenefitShowRequest names a study.
type BenefitShowRequest struct {
	ID string `json:"id" jsonschema:"study id"`
}

var benefitIDRe = regexp.MustCompile(`^bs-[0-9]{8}T[0-9]{6}\.[0-9]{3}-[0-9a-f]{8}$`)

// Validate requires a well-formed study id (it names a directory).
func (r *BenefitShowRequest) Validate() error {
	if err := required("id", r.ID); err != nil {
		return err
	}
	if !benefitIDRe.MatchString(r.ID) {
		return core.FieldErrorf(core.CodeInvalidArgument, "id", "%q is not a benefit study id (bs-…)", r.ID)
	}
	return nil
}

// BenefitListRequest lists studies.
type BenefitListRequest struct {
	Line  string `json:"line,omitempty" jsonschema:"only studies of this line"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many, 1..200 (default 50)"`
}

// Validate checks the line and the limit.
func (r *BenefitListRequest) Validate() error {
	if r.Line != "" {
		if err := core.CheckID("line", r.Line); err != nil {
			return err
		}
	}
	if r.Limit < 0 || r.Limit > 200 {
		return core.FieldErrorf(core.CodeInvalidArgument, "limit", "limit must be 1..200")
	}
	return nil
}

// benefitSlot: one study at a time in a process (a study trains a model
// and simulates 4 × runs runs of the line).
var (
	benefitSlot = make(chan struct{}, 1)
	benefitLive sync.Map // study dir → true while its goroutine runs
)

func (a *App) benefitDir() (string, error) {
	if a.d.DataDir == "" {
		return "", core.Errorf(core.CodeUsage, "the benefit study needs a data directory")
	}
	return filepath.Join(a.d.DataDir, "benefit"), nil
}

// BenefitRun checks the request's limits, takes the process's study slot
// and starts the study (with Wait, runs it to its end).
func (a *App) BenefitRun(ctx context.Context, p Principal, req BenefitRunRequest) (BenefitStudy, error) {
	return run(ctx, a, p, &opBenefitRun, req, func(ctx context.Context, p Principal, req BenefitRunRequest) (BenefitStudy, error) {
		if err := p.Allow(auth.ActJob, req.Line); err != nil {
			return BenefitStudy{}, err
		}
		if err := a.lineExists(ctx, req.Line); err != nil {
			return BenefitStudy{}, err
		}
		root, err := a.benefitDir()
		if err != nil {
			return BenefitStudy{}, err
		}
		if a.d.Runner == nil || a.d.Runner.Trainers() == nil {
			return BenefitStudy{}, core.Errorf(core.CodeUsage, "the benefit study needs the native trainers (a process with a job runner)")
		}
		if req.Runs == 0 {
			req.Runs = 60
		}
		if req.Seed == 0 {
			req.Seed = 7
		}
		select {
		case benefitSlot <- struct{}{}:
		default:
			return BenefitStudy{}, core.Errorf(core.CodeQueueFull, "a benefit study is already running in this process; wait for it to end (benefit.list)")
		}
		release := func() { <-benefitSlot }
		now := a.o.WallNow().UTC()
		st := BenefitStudy{ID: a.newID("bs"), Line: req.Line, Status: BenefitRunning, Runs: req.Runs, Seed: req.Seed, Wear: req.Wear, MaterialLots: req.MaterialLots,
			RequestedBy: p.Name, CreatedAt: now, UpdatedAt: now, Stage: "starting"}
		dir := filepath.Join(root, st.ID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			release()
			return BenefitStudy{}, core.Wrap(core.CodeInternal, err, "benefit study directory")
		}
		if err := writeStudy(dir, &st); err != nil {
			release()
			return BenefitStudy{}, err
		}
		o := benefit.Options{Runs: req.Runs, Seed: req.Seed, Wear: req.Wear, MaterialLots: req.MaterialLots, Trainers: a.d.Runner.Trainers()}
		if a.o.BenefitStudy != nil {
			a.o.BenefitStudy(&o)
		}
		if req.Wait {
			defer release()
			return a.runStudy(ctx, dir, st, o), nil
		}
		benefitLive.Store(dir, true)
		// The study outlives the request but not the process: Shutdown
		// cancels it and waits for its record (interrupted).
		if !a.background(ctx, func(ctx context.Context) {
			defer release()
			a.runStudy(ctx, dir, st, o)
		}) {
			release()
			benefitLive.Delete(dir)
			if err := os.RemoveAll(dir); err != nil {
				a.log.Warn("benefit study: remove the directory of a study not started", "id", st.ID, "err", err)
			}
			return BenefitStudy{}, core.Errorf(core.CodeWorkerLost, "the process is shutting down: the benefit study was not started")
		}
		return st, nil
	})
}

// runStudy runs the study in a scratch store under dir, keeping its
// record (progress, heartbeat, then the report or the error) in dir.
func (a *App) runStudy(ctx context.Context, dir string, st BenefitStudy, o benefit.Options) BenefitStudy {
	defer benefitLive.Delete(dir)
	var mu sync.Mutex
	save := func(f func(*BenefitStudy)) {
		mu.Lock()
		defer mu.Unlock()
		f(&st)
		st.UpdatedAt = a.o.WallNow().UTC()
		if err := writeStudy(dir, &st); err != nil {
			a.log.Warn("benefit study: write record", "id", st.ID, "err", err)
		}
	}
	stop := make(chan struct{})
	beat := time.NewTicker(benefitBeat)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-beat.C:
				save(func(*BenefitStudy) {})
			}
		}
	}()
	phases := 0
	o.Logf = func(format string, args ...any) {
		line := strings.TrimSpace(fmt.Sprintf(format, args...))
		save(func(s *BenefitStudy) {
			phases++
			s.Stage, s.Progress = line, min(1, float64(phases)/benefitPhases)
		})
	}
	scratch := filepath.Join(dir, "data")
	res, err := func() (*benefit.Result, error) {
		if err := os.MkdirAll(scratch, 0o700); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "benefit study scratch store")
		}
		s, err := sqlite.Open(scratch)
		if err != nil {
			return nil, err
		}
		defer func() { _ = s.Close() }() // scratch, removed below
		o.Store, o.DataDir = s, scratch
		return benefit.Run(ctx, o)
	}()
	beat.Stop()
	close(stop)
	if rmErr := os.RemoveAll(scratch); rmErr != nil {
		a.log.Warn("benefit study: remove scratch store", "id", st.ID, "err", rmErr)
	}
	save(func(s *BenefitStudy) {
		end := a.o.WallNow().UTC()
		s.FinishedAt = &end
		if err != nil && ctx.Err() != nil {
			// stopped by the process shutting down (App.Shutdown)
			s.Status = BenefitInterrupted
			s.Error = &auth.ErrorBody{Code: core.CodeWorkerLost, Message: "the process shut down before the study finished (" + s.Stage + ")"}
			return
		}
		if err != nil {
			b := auth.BodyOf(err)
			s.Status, s.Error = BenefitFailed, &b
			return
		}
		s.Status, s.Report, s.Progress, s.Stage = BenefitDone, res, 1, "done"
	})
	mu.Lock()
	defer mu.Unlock()
	return st
}

func writeStudy(dir string, st *BenefitStudy) error {
	b, err := json.Marshal(st)
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "benefit study record")
	}
	tmp, err := os.CreateTemp(dir, ".study-*.json")
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "benefit study record")
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return core.Wrap(core.CodeInternal, err, "benefit study record")
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return core.Wrap(core.CodeInternal, err, "benefit study record")
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, "study.json")); err != nil {
		return core.Wrap(core.CodeInternal, err, "benefit study record")
	}
	return nil
}

// readStudy reads a study's record; a running one whose heartbeat is
// stale and that no goroutine of this process runs is interrupted.
func (a *App) readStudy(dir string) (BenefitStudy, error) {
	var st BenefitStudy
	b, err := safefile.ReadFileNoFollow(filepath.Join(dir, "study.json"), benefitMaxRec)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return st, core.Errorf(core.CodeNotFound, "no benefit study %s", filepath.Base(dir))
		}
		return st, core.Wrap(core.CodeInternal, err, "benefit study %s", filepath.Base(dir))
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, core.Wrap(core.CodeInternal, err, "benefit study %s: record", filepath.Base(dir))
	}
	if _, live := benefitLive.Load(dir); st.Status == BenefitRunning && !live && a.o.WallNow().Sub(st.UpdatedAt) > benefitStale {
		st.Status = BenefitInterrupted
		st.Error = &auth.ErrorBody{Code: core.CodeWorkerLost, Message: "the process running the study ended before it finished (no heartbeat since " + st.UpdatedAt.Format(time.RFC3339) + ")"}
	}
	return st, nil
}

// BenefitShow returns a study: its progress, or its report.
func (a *App) BenefitShow(ctx context.Context, p Principal, req BenefitShowRequest) (BenefitStudy, error) {
	return run(ctx, a, p, &opBenefitShow, req, func(ctx context.Context, p Principal, req BenefitShowRequest) (BenefitStudy, error) {
		root, err := a.benefitDir()
		if err != nil {
			return BenefitStudy{}, err
		}
		st, err := a.readStudy(filepath.Join(root, req.ID))
		if err != nil {
			return BenefitStudy{}, unseen(p, err)
		}
		if err := allowStudy(p, st); err != nil {
			return BenefitStudy{}, err
		}
		return st, nil
	})
}

// allowStudy lets p read study st: a study of a line in p's scope, or
// one without a line (kept before studies had one) when p's scope is
// every line. A scoped caller is refused as for another line's study or
// a missing one (unseen): the three cannot be told apart.
func allowStudy(p Principal, st BenefitStudy) error {
	if st.Line == "" && !p.AllLines() {
		return p.ScopeRefusal()
	}
	return p.Allow(auth.ActRead, st.Line)
}

// lineExists refuses a line the store has never seen (AML_NOT_FOUND).
func (a *App) lineExists(ctx context.Context, line string) error {
	ls, err := a.d.Store.ListLines(ctx)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.ID == line {
			return nil
		}
	}
	return core.FieldErrorf(core.CodeNotFound, "line", "no line %q", line)
}

// BenefitList lists the studies kept, newest first, each without its
// per-run series (benefit.show has them).
func (a *App) BenefitList(ctx context.Context, p Principal, req BenefitListRequest) (List[BenefitStudy], error) {
	return run(ctx, a, p, &opBenefitList, req, func(ctx context.Context, p Principal, req BenefitListRequest) (List[BenefitStudy], error) {
		root, err := a.benefitDir()
		if err != nil {
			return List[BenefitStudy]{}, err
		}
		limit := req.Limit
		if limit == 0 {
			limit = 50
		}
		if err := p.Allow(auth.ActRead, req.Line); err != nil {
			return List[BenefitStudy]{}, err
		}
		entries, err := os.ReadDir(root)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return List[BenefitStudy]{}, core.Wrap(core.CodeInternal, err, "benefit studies")
		}
		var ids []string
		for _, e := range entries {
			if e.IsDir() && benefitIDRe.MatchString(e.Name()) {
				ids = append(ids, e.Name())
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(ids))) // ids are time ordered
		var out []BenefitStudy
		for _, id := range ids {
			if len(out) == limit {
				break
			}
			st, err := a.readStudy(filepath.Join(root, id))
			if err != nil {
				continue // a study being created has no record yet
			}
			if allowStudy(p, st) != nil || req.Line != "" && st.Line != req.Line {
				continue // another line's
			}
			if st.Report != nil {
				r := *st.Report
				r.Modes = append([]benefit.ModeResult(nil), r.Modes...)
				for i := range r.Modes {
					r.Modes[i].RunMeans = nil
				}
				st.Report = &r
			}
			out = append(out, st)
		}
		return ListOf(out), nil
	})
}

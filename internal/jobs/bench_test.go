package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
)

const benchJobs = 1000

// benchPoll is the fetch cadence of both benchmarks: River on SQLite polls
// (no LISTEN/NOTIFY), so the cadence bounds both rates the same way.
const benchPoll = 5 * time.Millisecond

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done chan struct{}
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[noopArgs]) error {
	w.done <- struct{}{}
	return nil
}

// BenchmarkRiverNoop is the comparison for BenchmarkJobsEndToEnd: River
// alone on the same SQLite settings and pool, inserting benchJobs no-op jobs
// and working them to completion with the same concurrency.
func BenchmarkRiverNoop(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := sqlite.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if err := MigrateRiver(ctx, st.DB()); err != nil {
			b.Fatal(err)
		}
		w := &noopWorker{done: make(chan struct{}, benchJobs)}
		workers := river.NewWorkers()
		river.AddWorker(workers, w)
		client, err := river.NewClient(riversqlite.New(st.DB()), &river.Config{
			FetchPollInterval: benchPoll, FetchCooldown: benchPoll, PollOnly: true,
			Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}}, Workers: workers,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		for k := 0; k < benchJobs; k++ {
			if _, err := client.Insert(ctx, noopArgs{N: k}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
				b.Fatal(err)
			}
		}
		for k := 0; k < benchJobs; k++ {
			<-w.done
		}
		// Wait for River to record completion too.
		for {
			res, err := client.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateCompleted).First(benchJobs))
			if err == nil && len(res.Jobs) == benchJobs {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(float64(benchJobs)/time.Since(t0).Seconds(), "jobs/s")
		b.StopTimer()
		if err := client.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkJobsEndToEnd submits benchJobs trivial jobs (test_mean@1 with no
// training delay) and waits until every one is done with its model
// registered: dataset verification, job dir, training, platform evaluation
// and the atomic finish are all included.
func BenchmarkJobsEndToEnd(b *testing.B) {
	t := &testing.T{}
	_ = t
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, dir, ds := tinyFixture(b)
		ctx := context.Background()
		bus := events.New()
		sub := bus.Subscribe(4*benchJobs, func(e events.Event) bool { return e.Kind == events.JobState && e.Data["status"] == core.JobDone })
		r := NewRunner(st, Options{DataDir: dir, Trainers: NewTrainers(TestMeanTrainer{}), Bus: bus, Limits: core.JobLimits{MaxQueued: 10 * benchJobs, MaxPerDataset: 10 * benchJobs}})
		q, err := NewQueue(ctx, st.DB(), r, QueueOptions{Work: true, MaxConcurrent: 2, PollInterval: benchPoll})
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		for k := 0; k < benchJobs; k++ {
			if _, err := r.Submit(ctx, SubmitRequest{DatasetID: ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{}`), Seed: int64(k)}); err != nil {
				b.Fatal(err)
			}
		}
		for k := 0; k < benchJobs; k++ {
			<-sub.C
		}
		b.ReportMetric(float64(benchJobs)/time.Since(t0).Seconds(), "jobs/s")
		b.StopTimer()
		done, _ := st.ListJobs(ctx, core.JobFilter{Status: core.JobDone, Limit: 10 * benchJobs})
		if len(done) != benchJobs {
			b.Fatalf("%d jobs done", len(done))
		}
		if err := q.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

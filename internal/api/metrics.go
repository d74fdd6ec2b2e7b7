package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/service"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics on their own registry (one
// per server, so tests and several servers in a process do not collide).
type metrics struct {
	reg        *prometheus.Registry
	latency    *prometheus.HistogramVec
	ingested   prometheus.Counter
	batches    *prometheus.CounterVec
	trials     *prometheus.HistogramVec
	sseDropped prometheus.Counter
	sseClients prometheus.Gauge
}

func newMetrics(d *service.Deps) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aml_http_request_duration_seconds",
		Help:    "HTTP request latency by route pattern, method and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method", "code"})
	m.ingested = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "aml_ingest_samples_total",
		Help: "Samples written through the API (JSON batches and CSV uploads); rate() gives the ingest rate.",
	})
	m.batches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aml_ingest_requests_total",
		Help: "Ingest requests by kind (json, csv) and outcome (ok, error).",
	}, []string{"kind", "outcome"})
	m.trials = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aml_twin_trial_duration_seconds",
		Help:    "Latency of virtual trials, optimisations and gate evaluations run in this process (API, MCP, UI), refused calls included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"kind"})
	m.sseDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "aml_events_slow_consumers_dropped_total",
		Help: "Event-stream clients disconnected because their buffer overflowed.",
	})
	m.sseClients = prometheus.NewGauge(prometheus.GaugeOpts{Name: "aml_events_clients", Help: "Open event-stream clients."})
	m.reg.MustRegister(m.latency, m.ingested, m.batches, m.trials, m.sseDropped, m.sseClients,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if d != nil && d.Store != nil {
		m.reg.MustRegister(&jobCollector{d: d})
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// jobCollector reads jobs by state from the store at scrape time, so the
// figures are the store's truth whichever process ran the jobs.
type jobCollector struct{ d *service.Deps }

var (
	jobsDesc  = prometheus.NewDesc("aml_jobs", "Training jobs by state (from the store).", []string{"state"}, nil)
	queueDesc = prometheus.NewDesc("aml_job_queue_depth", "Jobs queued and not yet claimed by a worker.", nil, nil)
)

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc; ch <- queueDesc }

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := map[string]float64{}
	for _, st := range []string{"queued", "provisioning", "training", "evaluating", "done", "failed", "cancelled", "timeout", "interrupted"} {
		counts[st] = 0
	}
	rows, err := c.d.Store.SQL().QueryContext(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int64
		if rows.Scan(&st, &n) == nil {
			counts[st] = float64(n)
		}
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, n, st)
	}
	ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, counts["queued"])
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument observes the latency of h under its route pattern (not the
// raw path: ids would make the label set unbounded).
func (s *Server) instrument(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		s.metrics.latency.WithLabelValues(pattern, r.Method, strconv.Itoa(code)).Observe(time.Since(t0).Seconds())
	}
}

func (m *metrics) countIngest(kind string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.batches.WithLabelValues(kind, outcome).Inc()
}

// observeOp records the ops the metrics follow (app.App.OnDone).
func (m *metrics) observeOp(op string, d time.Duration, out any, err error) {
	switch op {
	case "trial.run":
		m.trials.WithLabelValues("trial").Observe(d.Seconds())
	case "optimize":
		m.trials.WithLabelValues("optimize").Observe(d.Seconds())
	case "gate.evaluate":
		m.trials.WithLabelValues("gate").Observe(d.Seconds())
	case "ingest.samples":
		m.countIngest("json", err)
		if r, ok := out.(app.IngestSamplesResponse); ok && err == nil {
			m.ingested.Add(float64(r.Samples))
		}
	case "ingest.csv":
		m.countIngest("csv", err)
		if r, ok := out.(ingest.FileReport); ok && err == nil {
			m.ingested.Add(float64(r.Samples))
		}
	}
}

// refused counts a request refused before its op ran (role, a body or
// parameter that does not decode) where the metrics follow the op.
func (m *metrics) refused(op string, err error) {
	switch op {
	case "ingest.samples":
		m.countIngest("json", err)
	case "ingest.csv":
		m.countIngest("csv", err)
	}
}

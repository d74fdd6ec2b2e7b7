package main

import (
	"fmt"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on stderr that exists only on an interactive
// terminal and never with --json; every method is a no-op otherwise.
type progress struct{ bar *progressbar.ProgressBar }

func (a *app) newProgress(total int64, desc string, bytes bool) *progress {
	if !a.interactive() {
		return &progress{}
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

func (p *progress) set(n int64) {
	if p.bar != nil {
		_ = p.bar.Set64(n)
	}
}

func (p *progress) describe(s string) {
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// job shows a job event's progress, status and stage; it returns the
// status ("" when the event has none).
func (p *progress) job(data map[string]any) string {
	if v, ok := data["progress"].(float64); ok && v >= 0 {
		p.set(int64(v * 100))
	}
	st := ""
	if v, ok := data["status"]; ok {
		st = fmt.Sprint(v)
		p.describe(st)
	}
	if stg, ok := data["stage"].(string); ok && stg != "" {
		p.describe(stg)
	}
	return st
}

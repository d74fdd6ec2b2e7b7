package main

import (
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

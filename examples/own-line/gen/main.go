// Command gen writes the exports of a simulated plant line that is not
// AML's injection simulator (internal/sim.WritePlantExports): five runs of
// a two-input, one-output first-order-plus-dead-time tank as a historian
// exports them (local times, ';', decimal commas), the line file, the
// recipe and the batch records, and the first minutes of the current run
// ending now, for examples/own-line/run.sh.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aml-project/aml/internal/sim"
)

func main() {
	out := flag.String("out", "exports", "directory to write the exports to")
	seed := flag.Uint64("seed", 3, "noise and input sequence seed")
	end := flag.String("live-end", "", "RFC 3339 time of the current run's last sample (default: now)")
	flag.Parse()
	liveEnd := time.Now()
	if *end != "" {
		t, err := time.Parse(time.RFC3339, *end)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen: -live-end:", err)
			os.Exit(2)
		}
		liveEnd = t
	}
	zone, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	const runs, liveMinutes, stepSec = 5, 12, 5
	liveStart := liveEnd.Truncate(stepSec * time.Second).Add(-(liveMinutes*60 - stepSec) * time.Second)
	cfg := sim.PlantConfig{Runs: runs, Seed: *seed, Zone: zone, StepSec: stepSec, LiveMinutes: liveMinutes,
		First: liveStart.In(zone).AddDate(0, 0, -runs)}
	ex, err := sim.WritePlantExports(*out, cfg)
	if err == nil {
		err = os.Remove(ex.Live[1]) // the minutes after now: not exported yet
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %d runs, the line file, the recipe, the batch records and the current run (until %s) to %s\n",
		len(ex.Runs), ex.LiveEnd[0].In(zone).Format("2006-01-02 15:04:05 MST"), filepath.Clean(*out))
}

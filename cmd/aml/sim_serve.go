package main

// aml sim serve-opcua: the simulated injection (or tank) line as a live OPC UA server.

import (
	"fmt"
	"io"
	"time"

	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/spf13/cobra"
)

func newSimServeOPCUACmd(a *app) *cobra.Command {
	var o opcuasrv.Options
	var forDur time.Duration
	cmd := &cobra.Command{
		Use:   "serve-opcua [--addr 127.0.0.1:4840] [--speed 10] [--kind injection|tank]",
		Short: "Run the simulated injection line (or the tank line) live as an OPC UA server",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Logger = a.log
			srv, err := opcuasrv.Start(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer func() { _ = srv.Close() }() // a simulator: nothing to save on the way out
			nodes := map[string]string{}
			for _, sp := range srv.Nodes() {
				nodes[sp] = srv.NodeID(sp)
			}
			if !a.jsonOut {
				fmt.Fprintf(a.stdout, "serving the simulated %s line on %s (speed %gx, step %d ms); Ctrl-C stops\n", o.Kind, srv.Endpoint(), o.Speed, o.StepMs)
			}
			var stop <-chan time.Time
			if forDur > 0 {
				stop = time.After(forDur)
			}
			select {
			case <-cmd.Context().Done():
			case <-stop:
			}
			st := srv.Stats()
			return a.emit(map[string]any{"endpoint": srv.Endpoint(), "nodes": nodes, "stats": st}, func(w io.Writer) {
				fmt.Fprintf(w, "stopped after %d steps (line clock %s, run %q), %d setpoint writes, %d refused\n",
					st.Steps, time.UnixMilli(st.NowMs).UTC().Format(time.RFC3339), st.RunID, st.Writes, st.Refusals)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Kind, "kind", opcuasrv.KindInjection, "the simulated line: injection, or tank (heater_sp, feed_sp, level)")
	fl.StringVar(&o.Addr, "addr", "127.0.0.1:4840", "host:port to listen on (port 0: a free port)")
	fl.Float64Var(&o.Speed, "speed", 1, "simulated seconds per wall second (1: real time)")
	fl.Int64Var(&o.StepMs, "step-ms", 1000, "one physics step of simulated time, ms")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the noise and disturbances")
	fl.IntVar(&o.RunSteps, "run-steps", 1800, "steps per run")
	fl.IntVar(&o.IdleSteps, "idle-steps", 0, "steps between runs (run_id empty)")
	fl.IntVar(&o.FirstRun, "first-run", 0, "number the runs from this + 1")
	fl.Float64Var(&o.WearRuns, "wear-runs", 0, "the line's age in runs (mould wear on part weight)")
	fl.BoolVar(&o.WriteOnlySetpoints, "write-only-setpoints", false, "setpoints can be written but not read back")
	fl.DurationVar(&forDur, "for", 0, "stop after this much wall time (0: until interrupted)")
	return cmd
}

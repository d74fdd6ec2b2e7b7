package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/render"

	"github.com/aml-project/aml/internal/envlease"
	"github.com/spf13/cobra"
)

func newEnvCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Trainer environments: list, rebuild, unlock",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List environments with their readers, rebuild lock, stale files and last rebuild",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := envlease.Open(a.dataDir)
			if err != nil {
				return err
			}
			sts, err := m.List()
			if err != nil {
				return err
			}
			return a.emit(sts, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tREADERS\tREBUILDING\tSTALE\tLAST-REBUILD\tDIR")
				for _, s := range sts {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.Readers, envRebuilding(s), envStale(s), envLast(s.LastRebuild), s.Dir)
				}
				tw.Flush()
				for _, s := range sts {
					if l := s.Rebuilding; l != nil && l.Stale {
						fmt.Fprintf(w, "%s: the lock looks stale (%s): %s\n", s.Name, l.Reason, l.Hint)
					}
					for _, r := range s.StaleReaders {
						fmt.Fprintf(w, "%s: stale read lease of %q (pid %d on %s): %s\n", s.Name, r.Holder, r.PID, r.Hostname, r.Reason)
					}
					if len(s.StaleReaders) > 0 {
						fmt.Fprintf(w, "%s: stale read leases do not block a rebuild; 'aml env unlock %s' removes them\n", s.Name, s.Name)
					}
				}
				fmt.Fprintf(w, "%d environment(s)\n", len(sts))
			})
		},
	}
	var owner string
	rebuild := &cobra.Command{
		Use:   "rebuild NAME",
		Short: "Rebuild an environment (refused with ENV_BUSY while jobs use it)",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := envlease.Open(a.dataDir)
			if err != nil {
				return err
			}
			if owner == "" {
				owner = defaultOwner()
			}
			res, err := m.Rebuild(cmd.Context(), args[0], owner, a.stderr)
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "rebuilt %s in %.1fs (%s)\n", res.Name, res.Seconds, res.Dir)
				if n := len(res.StaleReaders); n > 0 {
					fmt.Fprintf(w, "ignored %d stale read lease(s); 'aml env unlock %s' removes them\n", n, res.Name)
				}
			})
		},
	}
	rebuild.Flags().StringVar(&owner, "owner", "", "who is rebuilding, recorded in the lock (default cli:$USER)")
	var force bool
	unlock := &cobra.Command{
		Use:   "unlock NAME [--force]",
		Short: "Remove a stale rebuild lock and stale read leases",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := envlease.Open(a.dataDir)
			if err != nil {
				return err
			}
			res, err := m.Unlock(args[0], force)
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) {
				fmt.Fprintln(w, res.String())
				if res.RemovedLock != nil {
					fmt.Fprintf(w, "the environment may be half built: rebuild it with 'aml env rebuild %s'\n", res.Name)
				}
			})
		},
	}
	unlock.Flags().BoolVar(&force, "force", false, "also remove a lock that looks live (never one whose process runs on this host)")
	cmd.AddCommand(list, rebuild, unlock)
	return cmd
}

func defaultOwner() string {
	u := os.Getenv("USER")
	if u == "" {
		u = os.Getenv("USERNAME")
	}
	if u == "" {
		u = "unknown"
	}
	return "cli:" + u
}

func envRebuilding(s envlease.Status) string {
	l := s.Rebuilding
	if l == nil {
		return "-"
	}
	if l.Unreadable {
		return "yes (unreadable lock)"
	}
	return fmt.Sprintf("%s pid %d %s", l.Owner, l.PID, time.Since(time.UnixMilli(l.StartedAt)).Round(time.Second))
}

func envStale(s envlease.Status) string {
	var parts []string
	if s.Rebuilding != nil && s.Rebuilding.Stale {
		parts = append(parts, "lock")
	}
	if n := len(s.StaleReaders); n > 0 {
		parts = append(parts, fmt.Sprintf("%d lease(s)", n))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func envLast(l *envlease.LastRebuild) string {
	if l == nil {
		return "never"
	}
	if l.OK {
		return fmt.Sprintf("%s ok %.1fs", render.Millis(l.FinishedAt), l.Seconds)
	}
	return fmt.Sprintf("%s failed (exit %d)", render.Millis(l.FinishedAt), l.ExitCode)
}

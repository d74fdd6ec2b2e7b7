package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/audit"
	"github.com/spf13/cobra"
)

func newAuditCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify and list the hash-chained audit log of the digital twin"}
	var vr amlapp.AuditVerifyRequest
	verify := opCommand(a, &cobra.Command{
		Use:   "verify [--expect-head SEQ:HASH]",
		Short: "Recompute every audit entry's hash and link (AML_AUDIT_TAMPERED on any change)",
		Long: `Recompute the hash of every audit entry in seq order and check that each
entry links to the previous one and that no seq is missing. Any changed,
deleted or reordered entry fails with AML_AUDIT_TAMPERED naming the first bad
seq (exit status 1). On success prints the number of entries checked and the
head (the last entry's seq and hash).

The log is also checked against its signed checkpoints: heads signed with
the deployment key (cert-key.json, outside the database) at every
certificate lifecycle step and every 64 entries. Someone with write access
to the database can rewrite entries and recompute every hash after them;
the rewrite then no longer matches a signed checkpoint, and a checkpoint
cannot be forged without the key.

Removing the newest entries leaves a shorter chain that is valid in itself;
no log can show on its own that it was once longer. Keep the head printed
here somewhere else (certificates record it at issue) and pass it later with
--expect-head SEQ:HASH: verification then also fails unless the log still
holds exactly that entry.`,
		Args: argsExact(0),
	}, "audit.verify", "", &vr, nil, func(w io.Writer, res audit.VerifyResult) {
		fmt.Fprintf(w, "audit log verified: %d entr%s checked", res.Entries, auditPlural(res.Entries, "y", "ies"))
		if seq, _, ok := strings.Cut(vr.ExpectHead, ":"); ok {
			fmt.Fprintf(w, ", recorded head %s present", seq)
		}
		fmt.Fprintf(w, "\nhead %d:%s\n", res.HeadSeq, res.Head)
		if res.Checkpoints > 0 {
			fmt.Fprintf(w, "%d signed checkpoint(s), newest at entry %d\n", res.Checkpoints, res.SignedSeq)
		}
	})
	verify.Flags().StringVar(&vr.ExpectHead, "expect-head", "", "also require this head recorded earlier (SEQ:HASH); detects a truncated or rewritten tail")

	lr := amlapp.AuditListRequest{Limit: audit.DefaultListLimit}
	list := routed(&cobra.Command{
		Use:   "list [--after SEQ] [--limit N] [--subject S]",
		Short: "List audit entries in seq order (page with --after)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := prepare(cmd, &lr, func([]string) error {
				if lr.Limit < 1 {
					return usagef("--limit must be between 1 and %d", audit.MaxListLimit)
				}
				return nil
			}, args); err != nil {
				return err
			}
			var res amlapp.AuditListResponse
			if err := a.invoke(cmd, "audit.list", "", &lr, &res); err != nil {
				return err
			}
			if res.Items == nil {
				res.Items = []audit.Entry{}
			}
			return a.emit(res.Items, func(w io.Writer) { printAudit(w, res) })
		},
	}, "audit.list")
	fl := list.Flags()
	fl.Int64Var(&lr.After, "after", 0, "only entries with seq greater than this (cursor)")
	fl.IntVar(&lr.Limit, "limit", lr.Limit, fmt.Sprintf("at most this many entries (1..%d)", audit.MaxListLimit))
	fl.StringVar(&lr.Subject, "subject", "", "only entries about this subject")

	cmd.AddCommand(verify, list)
	return cmd
}

func auditPlural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// auditEllipsis shortens s to at most n runes.
func auditEllipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func printAudit(w io.Writer, res amlapp.AuditListResponse) {
	es := res.Items
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tACTOR\tACTION\tSUBJECT\tLINE\tHASH\tPAYLOAD")
	for _, e := range es {
		line := e.LineID
		if line == "" {
			line = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%.12s…\t%s\n", e.Seq, e.At.Format("2006-01-02T15:04:05.000Z"), e.Actor, e.Action, e.Subject, line, e.Hash, auditEllipsis(string(e.Payload), 60))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d entr%s", len(es), auditPlural(int64(len(es)), "y", "ies"))
	if res.NextAfter > 0 {
		fmt.Fprintf(w, "; more may exist: continue with --after %d", res.NextAfter)
	}
	fmt.Fprintln(w)
}

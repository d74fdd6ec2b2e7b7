package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/aml-project/aml/internal/audit"
	"github.com/spf13/cobra"
)

func newAuditCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify and list the hash-chained audit log of the digital twin"}
	openLog := func() (*audit.Log, error) {
		s, err := a.openStore()
		if err != nil {
			return nil, err
		}
		return audit.New(s.SQL()), nil
	}

	var expectHead string
	verify := &cobra.Command{
		Use:   "verify [--expect-head SEQ:HASH]",
		Short: "Recompute every audit entry's hash and link (AML_AUDIT_TAMPERED on any change)",
		Long: `Recompute the hash of every audit entry in seq order and check that each
entry links to the previous one and that no seq is missing. Any changed,
deleted or reordered entry fails with AML_AUDIT_TAMPERED naming the first bad
seq (exit status 1). On success prints the number of entries checked and the
head (the last entry's seq and hash).

Removing the newest entries leaves a shorter chain that is valid in itself;
no log can show on its own that it was once longer. Keep the head printed
here somewhere else (certificates record it at issue) and pass it later with
--expect-head SEQ:HASH: verification then also fails unless the log still
holds exactly that entry.`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var seq int64
			var hash string
			if expectHead != "" {
				s, h, ok := strings.Cut(expectHead, ":")
				n, err := strconv.ParseInt(s, 10, 64)
				if !ok || err != nil || n < 0 || len(h) != 64 || strings.Trim(strings.ToLower(h), "0123456789abcdef") != "" {
					return usagef("--expect-head: %q is not SEQ:HASH (a seq ≥ 0 and a 64-hex sha256, as printed by aml audit verify)", expectHead)
				}
				seq, hash = n, strings.ToLower(h)
			}
			l, err := openLog()
			if err != nil {
				return err
			}
			var res audit.VerifyResult
			if expectHead != "" {
				res, err = l.VerifyHead(cmd.Context(), seq, hash)
			} else {
				res, err = l.Verify(cmd.Context())
			}
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) { printAuditVerify(w, res, expectHead != "", seq) })
		},
	}
	verify.Flags().StringVar(&expectHead, "expect-head", "", "also require this head recorded earlier (SEQ:HASH); detects a truncated or rewritten tail")

	var (
		after   int64
		limit   int
		subject string
	)
	list := &cobra.Command{
		Use:   "list [--after SEQ] [--limit N] [--subject S]",
		Short: "List audit entries in seq order (page with --after)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usagef("--after must be ≥ 0")
			}
			if limit < 1 || limit > audit.MaxListLimit {
				return usagef("--limit must be between 1 and %d", audit.MaxListLimit)
			}
			l, err := openLog()
			if err != nil {
				return err
			}
			es, err := l.List(cmd.Context(), after, limit, subject)
			if err != nil {
				return err
			}
			if es == nil {
				es = []audit.Entry{}
			}
			return a.emit(es, func(w io.Writer) { printAudit(w, es, limit) })
		},
	}
	fl := list.Flags()
	fl.Int64Var(&after, "after", 0, "only entries with seq greater than this (cursor)")
	fl.IntVar(&limit, "limit", audit.DefaultListLimit, fmt.Sprintf("at most this many entries (1..%d)", audit.MaxListLimit))
	fl.StringVar(&subject, "subject", "", "only entries about this subject")

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

func printAuditVerify(w io.Writer, res audit.VerifyResult, expected bool, seq int64) {
	fmt.Fprintf(w, "audit log verified: %d entr%s checked", res.Entries, auditPlural(res.Entries, "y", "ies"))
	if expected {
		fmt.Fprintf(w, ", recorded head %d present", seq)
	}
	fmt.Fprintf(w, "\nhead %d:%s\n", res.HeadSeq, res.Head)
}

func printAudit(w io.Writer, es []audit.Entry, limit int) {
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
	if len(es) == limit {
		fmt.Fprintf(w, "; more may exist: continue with --after %d", es[len(es)-1].Seq)
	}
	fmt.Fprintln(w)
}

package main

import (
	"fmt"
	"io"

	"github.com/aml-project/aml/internal/render"

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
	}, "audit.verify", "", &vr, nil)
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
			return a.emit(res.Items, func(w io.Writer) { render.Text(w, "audit.list", &lr, res) })
		},
	}, "audit.list")
	fl := list.Flags()
	fl.Int64Var(&lr.After, "after", 0, "only entries with seq greater than this (cursor)")
	fl.IntVar(&lr.Limit, "limit", lr.Limit, fmt.Sprintf("at most this many entries (1..%d)", audit.MaxListLimit))
	fl.StringVar(&lr.Subject, "subject", "", "only entries about this subject")

	cmd.AddCommand(verify, list)
	return cmd
}

package main

import (
	"fmt"

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
		Args:  argsExact(0),
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
			return a.show("audit.list", &lr, res)
		},
	}, "audit.list")
	fl := list.Flags()
	fl.Int64Var(&lr.After, "after", 0, "only entries with seq greater than this (cursor)")
	fl.IntVar(&lr.Limit, "limit", lr.Limit, fmt.Sprintf("at most this many entries (1..%d)", audit.MaxListLimit))
	fl.StringVar(&lr.Subject, "subject", "", "only entries about this subject")

	cmd.AddCommand(verify, list)
	return cmd
}

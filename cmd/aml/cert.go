package main

import (
	"os"
	"strings"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/spf13/cobra"
)

// requireActor: on a local data directory the certificate and channel
// commands name the person acting (recorded in the audit log); with
// --server the token names them.
func (a *app) requireActor(cmd *cobra.Command) error {
	if a.remote.server == "" && strings.TrimSpace(cmd.Flags().Lookup("as").Value.String()) == "" {
		return usagef("%s: --as PERSON is required (who does this, recorded in the audit log)", cmd.CommandPath())
	}
	return nil
}

// reportCommand is opCommand for the ops that answer with their report
// beside a failure (verify, execute): a report that says anything (has)
// is printed before the error is returned.
func reportCommand(a *app, cmd *cobra.Command, op, actorFlag string, req any, build func([]string) error, has func(resp any) bool) *cobra.Command {
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := build(args); err != nil {
			return err
		}
		resp, err := a.call(c, op, actorFlag, req)
		if !has(resp) {
			return err
		}
		if perr := a.show(op, req, resp); perr != nil {
			return perr
		}
		return err
	}
	return routed(cmd, op)
}

func newCertCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Recommendation certificates: issue, approve, revoke, verify, execute"}
	id := func(p *string) func([]string) error { return func(args []string) error { *p = args[0]; return nil } }

	key := opCommand(a, &cobra.Command{Use: "key", Short: "Print the server's certificate public key (PEM) for verifiers outside AML", Args: argsExact(0)},
		"cert.key", "", &amlapp.CertKeyRequest{}, nil)

	lr := amlapp.CertListRequest{Limit: 100}
	list := opCommand(a, &cobra.Command{Use: "list [--status S] [--line L]", Short: "List certificates, newest first, each verified with the server key", Args: argsExact(0)},
		"cert.list", "", &lr, func([]string) error {
			if _, err := contract.ParseCertStatus(strings.ToUpper(lr.Status)); lr.Status != "" && err != nil {
				return usagef("--status: %q is not ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED", lr.Status)
			}
			return nil
		})
	list.Flags().StringVar(&lr.Status, "status", "", "only certificates with this status")
	list.Flags().StringVar(&lr.Line, "line", "", "only certificates of this line")
	list.Flags().IntVar(&lr.Limit, "limit", lr.Limit, "at most this many")

	var sr amlapp.CertRequest
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show a certificate (verified with the server key; AML_CERT_INVALID when tampered)", Args: argsExact(1)},
		"cert.show", "", &sr, id(&sr.ID))

	ir := amlapp.CertIssueRequest{TTL: amlapp.Duration(amlapp.DefaultCertTTL)}
	issue := &cobra.Command{
		Use:   "issue --trial ID --as PERSON [--ttl 15m]",
		Short: "Issue a signed certificate for a stored, passing, improving trial",
		Args:  argsExact(0),
	}
	opCommand(a, issue, "cert.issue", "as", &ir, func([]string) error {
		if ir.Trial == "" {
			return usagef("%s: --trial is required", issue.CommandPath())
		}
		return a.requireActor(issue)
	})
	issue.Flags().StringVar(&ir.Trial, "trial", "", "the stored trial to certify")
	issue.Flags().String("as", "", "the requester")
	issue.Flags().Var(&ir.TTL, "ttl", "lifetime (at most 24h)")

	var ar amlapp.CertRequest
	approve := &cobra.Command{Use: "approve ID --as PERSON", Short: "Approve an ISSUED certificate (never by its requester)", Args: argsExact(1)}
	opCommand(a, approve, "cert.approve", "as", &ar, func(args []string) error { ar.ID = args[0]; return a.requireActor(approve) })
	approve.Flags().String("as", "", "the approver")

	var rr amlapp.CertRevokeRequest
	revoke := &cobra.Command{Use: "revoke ID --as PERSON --reason R", Short: "Revoke an ISSUED or APPROVED certificate", Args: argsExact(1)}
	opCommand(a, revoke, "cert.revoke", "as", &rr, func(args []string) error {
		rr.ID = args[0]
		if strings.TrimSpace(rr.Reason) == "" {
			return usagef("%s: --reason is required", revoke.CommandPath())
		}
		return a.requireActor(revoke)
	})
	revoke.Flags().String("as", "", "who revokes")
	revoke.Flags().StringVar(&rr.Reason, "reason", "", "why")

	var vr amlapp.CertRequest
	verify := reportCommand(a, &cobra.Command{
		Use:   "verify ID",
		Short: "Verify a certificate: row, hash, Ed25519 signature, its audit trail and the audit chain",
		Args:  argsExact(1),
	}, "cert.verify", "", &vr, id(&vr.ID), func(r any) bool { return len(r.(amlapp.CertVerifyReport).Checks) > 0 })

	cmd.AddCommand(key, newCertRotateKeyCmd(a), list, show, issue, approve, revoke, verify, newCertExecuteCmd(a))
	return cmd
}

func newCertExecuteCmd(a *app) *cobra.Command {
	var (
		req amlapp.CertExecuteRequest
		o   certOPCUA
	)
	execute := &cobra.Command{
		Use:   "execute ID --as PERSON [--run R] [--opcua-endpoint URL --map FILE]",
		Short: "Write an APPROVED certificate's first step through the write guard (OPC UA or the recording writer)",
		Args:  argsExact(1),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if a.remote.server != "" && o.set() {
				return usagef("--opcua-endpoint/--map write from this process: they cannot be combined with --server (the server executes with its own writer)")
			}
			return nil
		},
	}
	reportCommand(a, execute, "cert.execute", "as", &req, func(args []string) error {
		req.ID = args[0]
		if err := a.requireActor(execute); err != nil || !o.set() {
			return err
		}
		return o.attach(a, 0)
	}, func(r any) bool { return r.(amlapp.CertExecuteResult).CertificateID != "" })
	closeLines(a, execute)
	f := execute.Flags()
	f.String("as", "", "who executes")
	f.StringVar(&req.Run, "run", "", "check that the action counts against this run (the certified snapshot's, else the line's active run); any other is refused")
	o.flags(execute, "instead of the recording writer")
	return execute
}

// flags adds the OPC UA writer's flags to cmd.
func (o *certOPCUA) flags(cmd *cobra.Command, instead string) {
	f := cmd.Flags()
	f.StringVar(&o.endpoint, "opcua-endpoint", "", "write over OPC UA to this server (opc.tcp://...) "+instead+"; needs --map")
	f.StringVar(&o.mapFile, "map", "", "OPC UA map file (as for aml connect opcua): which OPC UA node each AML node is")
	f.StringVar(&o.sec.Policy, "security-policy", "None", "OPC UA security policy")
	f.StringVar(&o.sec.Mode, "security-mode", "None", "OPC UA message security mode: None, Sign, SignAndEncrypt")
	f.StringVar(&o.sec.User, "user", "", "OPC UA user name (empty: anonymous)")
	f.StringVar(&o.passwordEnv, "password-env", "", "environment variable holding the OPC UA password")
	f.StringVar(&o.sec.CertFile, "cert", "", "OPC UA client certificate file")
	f.StringVar(&o.sec.KeyFile, "key", "", "OPC UA client private key file")
}

// certOPCUA are the execute command's OPC UA flags. The CLI keeps this
// (internal/connect/opcua) because the writer is the operator's
// process-level configuration, not a use case: attach only puts a line
// writer into this process's app Options, as aml serve --line-writers does
// for a server; cert.execute and steptest.execute (internal/app) choose
// it by the executed certificate's stored line after the role and line
// scope checks, and the write guard runs there.
type certOPCUA struct {
	endpoint, mapFile, passwordEnv string
	sec                            opcua.Security
}

func (o certOPCUA) set() bool { return o.endpoint != "" || o.mapFile != "" }

// attach gives this process the map's line's governed writer (an
// opcua.LineWriters of one line, dialled when the op asks for it): the
// same map file aml connect opcua reads (AML node → OPC UA node). The op
// writes through it (the guard reads each move — it must hold the
// certified From —, writes it and reads it back) and refuses another
// line's certificate or test. sample is a step test's sampling period.
func (o certOPCUA) attach(a *app, sample time.Duration) error {
	if o.endpoint == "" || o.mapFile == "" {
		return usagef("--opcua-endpoint and --map go together")
	}
	raw, err := os.ReadFile(o.mapFile)
	if err != nil {
		return usagef("--map: %v", err)
	}
	m, err := opcua.ParseMap(raw)
	if err != nil {
		return err
	}
	if o.passwordEnv != "" {
		o.sec.Password = os.Getenv(o.passwordEnv)
	}
	a.lines, err = opcua.NewLineWriters(opcua.LineConfig{Line: m.Line, Endpoint: o.endpoint, Map: m, Security: o.sec, Sample: sample})
	a.requireLine = err == nil
	return err
}

// closeLines closes the process's line writers once cmd has run: every
// write was read back before it counted, so closing loses nothing.
func closeLines(a *app, cmd *cobra.Command) {
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		defer func() {
			if a.lines != nil {
				_ = a.lines.Close()
			}
		}()
		return run(c, args)
	}
}

// newCertRotateKeyCmd is "aml cert rotate-key --as ADMIN": it runs only
// on the data directory (no --server: it has no API route from the CLI,
// and the op refuses API callers).
func newCertRotateKeyCmd(a *app) *cobra.Command {
	var req amlapp.CertRotateKeyRequest
	cmd := &cobra.Command{
		Use:   "rotate-key --as ADMIN",
		Short: "Replace the deployment's certificate signing key (old certificates still verify)",
		Args:  argsExact(0),
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := a.requireActor(c); err != nil {
			return err
		}
		resp, err := a.call(c, "cert.key.rotate", "as", &req)
		if err != nil {
			return err
		}
		return a.show("cert.key.rotate", &req, resp)
	}
	cmd.Flags().String("as", "", "the admin rotating the key (recorded in the audit log)")
	return cmd
}

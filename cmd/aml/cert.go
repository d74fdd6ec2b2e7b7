package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/spf13/cobra"
)

// certKey loads the server's certificate signing key from the data
// directory (created at first use).
// certStore is the store and the checked signing key, what every
// certificate command needs.
func (a *app) certStore() (store.Store, *cert.KeyPair, error) {
	k, err := a.certKey()
	if err != nil {
		return nil, nil, err
	}
	s, err := a.openStore() // opened (and cached) by certKey
	return s, k, err
}

// certKey loads (creating at first use) the data directory's signing key
// and checks it is the deployment's (registering it in the database when
// none is): processes sharing a PostgreSQL database on several machines
// must sign with one key (twinstore.RegisterSigningKey).
func (a *app) certKey() (*cert.KeyPair, error) {
	st, err := a.openStore()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(a.dataDir, cert.KeyFileName)); errors.Is(err, fs.ErrNotExist) {
		// No key here yet: if the deployment has one, making a new key
		// would only make one that is refused.
		id, err := st.DeploymentKeyID(a.context())
		if err != nil {
			return nil, err
		}
		if id != "" {
			return nil, twinstore.MissingKeyError(id)
		}
	}
	k, err := cert.LoadOrCreateKey(a.dataDir)
	if err != nil {
		return nil, err
	}
	if err := st.RegisterSigningKey(a.context(), k, "aml"); err != nil {
		return nil, err
	}
	return k, nil
}

// requireAs checks the --as flag.
func certRequireAs(cmd *cobra.Command, as string) error {
	if strings.TrimSpace(as) == "" {
		return usagef("%s: --as PERSON is required (who does this, recorded in the audit log)", cmd.CommandPath())
	}
	return nil
}

func certTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func certDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newCertCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Recommendation certificates: issue, approve, revoke, verify, execute"}

	key := &cobra.Command{
		Use:   "key",
		Short: "Print the server's certificate public key (PEM) for verifiers outside AML",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.certKey()
			if err != nil {
				return err
			}
			out := certKeyOutput{KeyID: k.ID, Algorithm: "ed25519", PublicKeyPEM: string(k.PublicPEM())}
			return a.emit(out, func(w io.Writer) { fmt.Fprint(w, out.PublicKeyPEM) })
		},
	}

	var lStatus, lLine string
	var lLimit int
	list := &cobra.Command{
		Use:   "list [--status S] [--line L]",
		Short: "List certificates, newest first, each verified with the server key",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st contract.CertStatus
			if lStatus != "" {
				var err error
				if st, err = contract.ParseCertStatus(strings.ToUpper(lStatus)); err != nil {
					return usagef("--status: %q is not ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED", lStatus)
				}
			}
			s, k, err := a.certStore()
			if err != nil {
				return err
			}
			items, err := s.ListCertificates(cmd.Context(), twinstore.CertFilter{Status: st, LineID: lLine, Limit: lLimit}, k.Public)
			if err != nil {
				return err
			}
			if items == nil {
				items = []twinstore.CertListItem{}
			}
			return a.emit(items, func(w io.Writer) { printCerts(w, items) })
		},
	}
	list.Flags().StringVar(&lStatus, "status", "", "only certificates with this status")
	list.Flags().StringVar(&lLine, "line", "", "only certificates of this line")
	list.Flags().IntVar(&lLimit, "limit", 100, "at most this many")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a certificate (verified with the server key; AML_CERT_INVALID when tampered)",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, k, err := a.certStore()
			if err != nil {
				return err
			}
			r, err := s.GetCertificate(cmd.Context(), args[0], k.Public)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { printCert(w, r) })
		},
	}

	var iTrial, iAs string
	var iTTL time.Duration
	issue := &cobra.Command{
		Use:   "issue --trial ID --as PERSON [--ttl 15m]",
		Short: "Issue a signed certificate for a stored, passing, improving trial",
		Long: `Certify the stored virtual trial ID: it must pass (every scene constraint
passed, in distribution) and improve on the baseline, or the issue is
refused with AML_CERT_REFUSED. The snapshot, scene, model and objective
hashes come from the stored records. --as is the requester, who can never
approve the certificate. It expires after --ttl (at most 24h).`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if iTrial == "" {
				return usagef("%s: --trial is required", cmd.CommandPath())
			}
			if err := certRequireAs(cmd, iAs); err != nil {
				return err
			}
			s, k, err := a.certStore()
			if err != nil {
				return err
			}
			r, err := s.IssueCertificate(cmd.Context(), iTrial, iAs, k, iTTL, a.now())
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { printIssued(w, r) })
		},
	}
	issue.Flags().StringVar(&iTrial, "trial", "", "the stored trial to certify")
	issue.Flags().StringVar(&iAs, "as", "", "the requester")
	issue.Flags().DurationVar(&iTTL, "ttl", cert.DefaultTTL, "lifetime (at most 24h)")

	var apAs string
	approve := &cobra.Command{
		Use:   "approve ID --as PERSON",
		Short: "Approve an ISSUED certificate (never by its requester)",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := certRequireAs(cmd, apAs); err != nil {
				return err
			}
			return a.certTransition(cmd, args[0], func(s store.Store, k *cert.KeyPair) (*twinstore.CertRecord, error) {
				return s.ApproveCertificate(cmd.Context(), args[0], apAs, k.Public, a.now())
			})
		},
	}
	approve.Flags().StringVar(&apAs, "as", "", "the approver")

	var rvAs, rvReason string
	revoke := &cobra.Command{
		Use:   "revoke ID --as PERSON --reason R",
		Short: "Revoke an ISSUED or APPROVED certificate",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := certRequireAs(cmd, rvAs); err != nil {
				return err
			}
			if strings.TrimSpace(rvReason) == "" {
				return usagef("%s: --reason is required", cmd.CommandPath())
			}
			return a.certTransition(cmd, args[0], func(s store.Store, k *cert.KeyPair) (*twinstore.CertRecord, error) {
				return s.RevokeCertificate(cmd.Context(), args[0], rvAs, rvReason, k.Public, a.now())
			})
		},
	}
	revoke.Flags().StringVar(&rvAs, "as", "", "who revokes")
	revoke.Flags().StringVar(&rvReason, "reason", "", "why")

	verify := &cobra.Command{
		Use:   "verify ID",
		Short: "Verify a certificate: row, hash, Ed25519 signature, its audit trail and the audit chain",
		Long: `Check certificate ID end to end with the server key in the data directory:
the stored row agrees with the certificate, certificateHash is the hash of
the signed body, the signature verifies, the audit log holds its issue entry
at the head recorded with it and a lifecycle that replays to its status and
approver, and the whole audit log verifies (aml audit verify). Any failure
exits 1 with AML_CERT_INVALID naming the check.`,
		Args: argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, k, err := a.certStore()
			if err != nil {
				return err
			}
			rep, verr := govern.VerifyCertificate(cmd.Context(), s, k.Public, args[0])
			if len(rep.Checks) == 0 {
				return verr
			}
			if err := a.emit(rep, func(w io.Writer) { printCertVerify(w, rep) }); err != nil {
				return err
			}
			return verr
		},
	}

	var exAs, exRun string
	var exOPCUA certOPCUA
	execute := &cobra.Command{
		Use:   "execute ID --as PERSON [--run R] [--opcua-endpoint URL --map FILE]",
		Short: "Write an APPROVED certificate's first step through the write guard (OPC UA or the recording writer)",
		Long: `Run the governed write of certificate ID: the fail-closed write guard checks
the line's channel, the scene's write policy, the certificate (approved,
unexpired, signature), the snapshot's freshness and the recorded write
history; a denial exits 1 with AML_WRITE_DENIED and its reason code. An
allowed write goes to the recording writer (seeded with the snapshot's
control values; a machine connector comes later), is read back, recorded
and audited, and the certificate becomes EXECUTED. --run is the batch run
the action counts against (default: the snapshot's run).

With --opcua-endpoint URL --map FILE the write goes to the line's OPC UA
server instead (the governed OPC UA writer; FILE is an aml connect opcua
map naming the OPC UA node of each AML node): each move is read (it must
hold the certified From value), written and read back — readback-verified,
transport-ack when the server does not let setpoints be read, or failed; a
readback that differs raises a write.alarm audit entry and stops the
certificate's remaining moves.`,
		Args: argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := certRequireAs(cmd, exAs); err != nil {
				return err
			}
			s, k, err := a.certStore()
			if err != nil {
				return err
			}
			var res govern.Result
			var xerr error
			if exOPCUA.set() {
				res, xerr = exOPCUA.execute(cmd.Context(), s, k, args[0], govern.Options{Actor: exAs, RunID: exRun, Now: a.now()})
				if res.CertificateID == "" && xerr != nil {
					return xerr
				}
			} else {
				w := guard.NewRecordingWriter(certSeedValues(cmd, s, args[0]))
				res, xerr = govern.Execute(cmd.Context(), s, k.Public, args[0], w, govern.Options{Actor: exAs, RunID: exRun, Now: a.now()})
			}
			if err := a.emit(res, func(w io.Writer) { printExecution(w, &res) }); err != nil {
				return err
			}
			return xerr
		},
	}
	// The OPC UA writer runs in this process; with --server the server's
	// own writer would execute the certificate and the flags would be
	// silently ignored, so the combination is refused before either runs.
	execute.PreRunE = func(cmd *cobra.Command, args []string) error {
		if a.remote.server != "" && exOPCUA.set() {
			return usagef("--opcua-endpoint/--map write from this process: they cannot be combined with --server (the server executes with its own writer)")
		}
		return nil
	}
	execute.Flags().StringVar(&exAs, "as", "", "who executes")
	execute.Flags().StringVar(&exRun, "run", "", "the batch run the action counts against (default: the snapshot's run)")
	execute.Flags().StringVar(&exOPCUA.endpoint, "opcua-endpoint", "", "write over OPC UA to this server (opc.tcp://...) instead of the recording writer; needs --map")
	execute.Flags().StringVar(&exOPCUA.mapFile, "map", "", "OPC UA map file (as for aml connect opcua): which OPC UA node each AML node is")
	execute.Flags().StringVar(&exOPCUA.sec.Policy, "security-policy", "None", "OPC UA security policy")
	execute.Flags().StringVar(&exOPCUA.sec.Mode, "security-mode", "None", "OPC UA message security mode: None, Sign, SignAndEncrypt")
	execute.Flags().StringVar(&exOPCUA.sec.User, "user", "", "OPC UA user name (empty: anonymous)")
	execute.Flags().StringVar(&exOPCUA.passwordEnv, "password-env", "", "environment variable holding the OPC UA password")
	execute.Flags().StringVar(&exOPCUA.sec.CertFile, "cert", "", "OPC UA client certificate file")
	execute.Flags().StringVar(&exOPCUA.sec.KeyFile, "key", "", "OPC UA client private key file")

	cmd.AddCommand(key, list, show, issue, approve, revoke, verify, execute)
	return cmd
}

// certTransition runs one lifecycle step and prints the certificate.
func (a *app) certTransition(cmd *cobra.Command, id string, step func(store.Store, *cert.KeyPair) (*twinstore.CertRecord, error)) error {
	s, k, err := a.certStore()
	if err != nil {
		return err
	}
	r, err := step(s, k)
	if err != nil {
		return err
	}
	return a.emit(r, func(w io.Writer) { printTransition(w, r) })
}

func printTransition(w io.Writer, r *twinstore.CertRecord) {
	c := r.Cert
	fmt.Fprintf(w, "certificate %s is %s", c.RecommendationID, c.Status)
	switch c.Status {
	case contract.CertApproved:
		fmt.Fprintf(w, " (approved by %s at %s, expires %s)", c.ApprovedBy, certTime(c.ApprovedAt), certTime(c.ExpiresAt))
	case contract.CertRevoked:
		fmt.Fprintf(w, " (revoked by %s: %s)", c.RevokedBy, c.RevokeReason)
	}
	fmt.Fprintln(w)
}

// seedValues are the recording writer's initial node values: the
// snapshot's control values on the certificate's nodes. When a record
// cannot be read the writer starts empty and the governed write denies.
func certSeedValues(cmd *cobra.Command, s store.Store, id string) map[string]float64 {
	out := map[string]float64{}
	ctx := cmd.Context()
	r, err := s.LoadCertificate(ctx, id)
	if err != nil {
		return out
	}
	tr, err := s.GetTrial(ctx, r.Cert.TrialID)
	if err != nil {
		return out
	}
	snap, err := s.GetSnapshot(ctx, tr.Trial.SnapshotID)
	if err != nil {
		return out
	}
	scene, _ := s.GetScene(ctx, r.Cert.SceneID, r.Cert.SceneVersion)
	for _, m := range govern.FirstStepMoves(r.Cert, scene, snap) {
		if !math.IsNaN(m.From) {
			out[m.NodeID] = m.From
		}
	}
	return out
}

func printExecution(w io.Writer, r *govern.Result) {
	if !r.Allowed {
		fmt.Fprintf(w, "write under certificate %s DENIED: %s\n%s\n", r.CertificateID, r.Reason, r.Detail)
		return
	}
	fmt.Fprintf(w, "certificate %s on line %s, run %s (snapshot %s): %s\n", r.CertificateID, r.LineID, certDash(r.RunID), r.SnapshotID, r.Status)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tVARIABLE\tFROM\tTO\tREADBACK\tRESULT")
	for _, m := range r.Writes {
		res := "verified"
		if !m.Verified {
			res = "FAILED: " + m.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%g\t%g\t%s\n", m.NodeID, m.VariableID, m.From, m.To, m.Readback, res)
	}
	tw.Flush()
	if r.Executed {
		fmt.Fprintf(w, "%d move(s) written and read back; certificate EXECUTED\n", r.Written())
	} else {
		fmt.Fprintf(w, "%s\n", r.Detail)
	}
}

func printCert(w io.Writer, r *twinstore.CertRecord) {
	c := r.Cert
	fmt.Fprintf(w, "certificate %s  status %s  line %s\n", c.RecommendationID, c.Status, r.LineID)
	fmt.Fprintf(w, "requested by %s at %s; expires %s\n", c.CreatedBy, certTime(c.CreatedAt), certTime(c.ExpiresAt))
	if c.ApprovedBy != "" {
		fmt.Fprintf(w, "approved by %s at %s\n", c.ApprovedBy, certTime(c.ApprovedAt))
	}
	if c.RevokedBy != "" {
		fmt.Fprintf(w, "revoked by %s at %s: %s\n", c.RevokedBy, certTime(c.RevokedAt), c.RevokeReason)
	}
	if !c.ExecutedAt.IsZero() {
		fmt.Fprintf(w, "executed at %s\n", certTime(c.ExecutedAt))
	}
	if !c.ExpiredAt.IsZero() {
		fmt.Fprintf(w, "marked expired at %s\n", certTime(c.ExpiredAt))
	}
	fmt.Fprintf(w, "trial %s  scene %s@%s\n", c.TrialID, c.SceneID, c.SceneVersion)
	fmt.Fprintf(w, "hashes: certificate %s\n        trial %s\n        scene %s\n        snapshot %s\n        model %s\n        objective %s\n",
		c.CertificateHash, c.TrialHash, c.SceneHash, c.SnapshotHash, c.ModelHash, c.ObjectiveHash)
	fmt.Fprintf(w, "signed by key %s; issue recorded in audit entry %d\n", c.KeyID, r.AuditSeq)
	b := c.BaselineComparison
	fmt.Fprintf(w, "improvement %.4g (baseline cost %.4g → candidate %.4g); uncertainty max std %.3g, coverage %.3g; OOD distance %.3g\n",
		b.Improvement, b.BaselineCost, b.CandidateCost, c.Uncertainty.MaxStd, c.Uncertainty.Coverage, c.OutOfDistribution.Distance)
	if len(c.CandidateControlTrajectory) > 0 {
		step := c.CandidateControlTrajectory[0]
		ks := make([]string, 0, len(step))
		for k := range step {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		parts := make([]string, len(ks))
		for i, k := range ks {
			parts[i] = fmt.Sprintf("%s=%g", k, step[k])
		}
		fmt.Fprintf(w, "first step (what a write applies): %s  (%d steps certified)\n", strings.Join(parts, " "), len(c.CandidateControlTrajectory))
	}
}

// certKeyOutput is what "aml cert key" prints (and GET /certificates/key
// returns).
type certKeyOutput struct {
	KeyID        string `json:"keyId"`
	Algorithm    string `json:"algorithm"`
	PublicKeyPEM string `json:"publicKeyPem"`
}

func printCerts(w io.Writer, items []twinstore.CertListItem) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tLINE\tTRIAL\tREQUESTED BY\tAPPROVED BY\tEXPIRES\tIMPROVEMENT\tVERIFIED")
	for _, it := range items {
		c := it.Cert
		v := "yes"
		if !it.Verified {
			v = "NO: " + it.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4g\t%s\n", c.RecommendationID, c.Status, it.LineID, certDash(c.TrialID), c.CreatedBy, certDash(c.ApprovedBy),
			certTime(c.ExpiresAt), c.BaselineComparison.Improvement, v)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d certificate(s)\n", len(items))
}

func printIssued(w io.Writer, r *twinstore.CertRecord) {
	fmt.Fprintf(w, "certificate %s issued for trial %s (status %s, expires %s)\nhash %s\nsigned by key %s; another person approves: aml cert approve %s --as PERSON\n",
		r.Cert.RecommendationID, r.Cert.TrialID, r.Cert.Status, certTime(r.Cert.ExpiresAt), r.Cert.CertificateHash, r.Cert.KeyID, r.Cert.RecommendationID)
}

func printCertVerify(w io.Writer, rep govern.VerifyReport) {
	for _, ch := range rep.Checks {
		mark := "ok  "
		if !ch.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-16s %s\n", mark, ch.Name, ch.Detail)
	}
	if rep.OK {
		fmt.Fprintf(w, "certificate %s verified (status %s, key %s, %d audit entries)\n", rep.CertificateID, rep.Status, rep.KeyID, rep.AuditEntries)
	}
}

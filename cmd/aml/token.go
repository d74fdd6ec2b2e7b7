package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/spf13/cobra"
)

// tokenActor is who runs a token command from the shell: --as, else the
// operating-system user (whoever can open the data directory is an
// administrator of this instance).
func tokenActor(as string) string {
	if s := strings.TrimSpace(as); s != "" {
		return s
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	if s := os.Getenv("USER"); s != "" {
		return "cli:" + s
	}
	return "cli"
}

func (a *app) openTokens() (*auth.Tokens, error) {
	s, err := a.openStore()
	if err != nil {
		return nil, err
	}
	return auth.NewTokens(s.SQL()), nil
}

func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "API tokens for aml serve: create, list, revoke"}

	var (
		cRole, cName, cLines, cAs string
		cTTL                      time.Duration
	)
	create := &cobra.Command{
		Use:   "create --role viewer|engineer|approver|admin|agent --name NAME [--lines L1,L2] [--ttl 720h]",
		Short: "Create a token and print it once (only its sha256 is stored)",
		Long: `Create an API token for a person or an agent. The token is printed once
and cannot be shown again: only its sha256 is stored. --lines limits it to
those lines (default every line). Roles: viewer (read), engineer (ingest,
datasets, jobs, trials, certificate requests, stage moves below production),
approver (approve/revoke certificates, promote to production, freeze scenes,
execute), admin (everything) and agent (an engineer that can never approve,
promote to production, freeze or write). Creation is audited.`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			role, err := auth.ParseRole(cRole)
			if err != nil {
				return usagef("--role: %q is not viewer, engineer, approver, admin or agent", cRole)
			}
			if strings.TrimSpace(cName) == "" {
				return usagef("--name is required (the person or agent the token is for; the actor of their audited actions)")
			}
			if cTTL < 0 {
				return usagef("--ttl must not be negative")
			}
			var lines []string
			if cLines != "" {
				lines = strings.Split(cLines, ",")
			}
			tk, err := a.openTokens()
			if err != nil {
				return err
			}
			info, secret, err := tk.Create(cmd.Context(), tokenActor(cAs), auth.NewToken{Name: cName, Role: role, Lines: lines, TTL: cTTL})
			if err != nil {
				return err
			}
			out := tokenCreated{info, secret}
			return a.emit(out, func(w io.Writer) { printTokenCreated(w, out) })
		},
	}
	create.Flags().StringVar(&cRole, "role", "", "viewer, engineer, approver, admin or agent")
	create.Flags().StringVar(&cName, "name", "", "person or agent the token is for")
	create.Flags().StringVar(&cLines, "lines", "", "comma-separated line ids the token may touch (default every line)")
	create.Flags().DurationVar(&cTTL, "ttl", 0, "expire after this long (default never)")
	create.Flags().StringVar(&cAs, "as", "", "who creates it (audit actor; default the OS user)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			tk, err := a.openTokens()
			if err != nil {
				return err
			}
			items, err := tk.List(cmd.Context())
			if err != nil {
				return err
			}
			return a.emit(items, func(w io.Writer) { printTokens(w, items) })
		},
	}

	var rAs string
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token at once (audited)",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tk, err := a.openTokens()
			if err != nil {
				return err
			}
			info, err := tk.Revoke(cmd.Context(), tokenActor(rAs), args[0])
			if err != nil {
				return err
			}
			return a.emit(info, func(w io.Writer) { printTokenRevoked(w, info) })
		},
	}
	revoke.Flags().StringVar(&rAs, "as", "", "who revokes it (audit actor; default the OS user)")
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func tokenLines(l []string) string {
	if len(l) == 0 {
		return "all"
	}
	return strings.Join(l, ",")
}

// tokenCreated is what "aml token create" prints (and POST /tokens
// returns): the token's record and, once, its secret.
type tokenCreated struct {
	auth.TokenInfo
	Token string `json:"token"`
}

func printTokenCreated(w io.Writer, out tokenCreated) {
	fmt.Fprintf(w, "token %s for %s (role %s, lines %s)\n", out.ID, out.Name, out.Role, tokenLines(out.Lines))
	fmt.Fprintln(w, out.Token)
	fmt.Fprintln(w, "store it now: it cannot be shown again")
}

func printTokens(w io.Writer, items []auth.TokenInfo) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tLINES\tCREATED\tSTATE")
	for _, t := range items {
		state := "active"
		switch {
		case t.RevokedAt != nil:
			state = "revoked " + t.RevokedAt.Format(time.RFC3339) + " by " + t.RevokedBy
		case !t.Active(now):
			state = "expired " + t.ExpiresAt.Format(time.RFC3339)
		case t.ExpiresAt != nil:
			state = "active until " + t.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, tokenLines(t.Lines), t.CreatedAt.Format(time.RFC3339), state)
	}
	tw.Flush()
}

func printTokenRevoked(w io.Writer, info auth.TokenInfo) {
	fmt.Fprintf(w, "token %s (%s) revoked\n", info.ID, info.Name)
}

package main

import (
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "API tokens for aml serve: create, list, revoke"}
	var cr amlapp.TokenCreateRequest
	create := opCommand(a, &cobra.Command{
		Use:   "create --role viewer|engineer|approver|admin|agent --name NAME [--lines L1,L2] [--ttl 720h]",
		Short: "Create a token and print it once (only its sha256 is stored)",
		Args:  argsExact(0),
	}, "token.create", "as", &cr, nil)
	fl := create.Flags()
	fl.StringVar((*string)(&cr.Role), "role", "", "viewer, engineer, approver, admin or agent")
	fl.StringVar(&cr.Name, "name", "", "person or agent the token is for (the actor of their audited actions)")
	fl.StringSliceVar(&cr.Lines, "lines", nil, "comma-separated line ids the token may touch (default every line)")
	fl.Var(&cr.TTL, "ttl", "expire after this long (default never)")
	fl.String("as", "", "who creates it (audit actor; default the OS user)")

	var lr amlapp.TokenListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List tokens (never their secrets)", Args: argsExact(0)}, "token.list", "", &lr, nil)
	var rr amlapp.TokenRevokeRequest
	revoke := opCommand(a, &cobra.Command{Use: "revoke ID", Short: "Revoke a token at once (audited)", Args: argsExact(1)}, "token.revoke", "as", &rr, arg0(&rr.ID))
	revoke.Flags().String("as", "", "who revokes it (audit actor; default the OS user)")
	cmd.AddCommand(create, list, revoke)
	return cmd
}

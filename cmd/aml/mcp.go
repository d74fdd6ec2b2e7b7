package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	amlmcp "github.com/aml-project/aml/internal/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// newMCPCmd is "aml mcp": the agent tools over stdio.
func newMCPCmd(a *app) *cobra.Command {
	var token, agent, lines string
	cmd := &cobra.Command{
		Use:   "mcp [--token T | --as-agent NAME [--lines L1,L2]]",
		Short: "Serve the MCP agent tools over stdio (for an agent that starts aml as a subprocess)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = os.Getenv("AML_TOKEN")
			}
			if token != "" && (cmd.Flags().Changed("as-agent") || lines != "") {
				return usagef("--token takes the role and lines from the token; do not combine it with --as-agent or --lines")
			}
			if strings.TrimSpace(agent) == "" {
				return usagef("--as-agent: the agent needs a name (it is recorded as the actor)")
			}
			ctx := cmd.Context()
			s, err := a.openStore()
			if err != nil {
				return err
			}
			p := auth.Principal{Name: agent, Role: auth.RoleAgent}
			if lines != "" {
				for _, l := range strings.Split(lines, ",") {
					if l = strings.TrimSpace(l); l != "" {
						p.Lines = append(p.Lines, l)
					}
				}
			}
			if token != "" {
				if p, err = auth.NewTokens(s.SQL()).VerifyToken(ctx, token); err != nil {
					return err
				}
			}
			d, err := a.process().Deps(ctx, false, 1)
			if err != nil {
				return err
			}
			amlmcp.Version = version
			a.log.Info("mcp: serving on stdio", "principal", p.Name, "role", p.Role, "lines", p.Lines)
			ap := amlapp.New(d, a.appOptions())
			err = amlmcp.NewServer(ap, p).Run(ctx, &sdk.StdioTransport{})
			// A step test still running in the background stops before
			// its next move and records its end before the process exits.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			return errors.Join(err, ap.Shutdown(sctx))
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "API token whose principal the tools act as (env AML_TOKEN)")
	cmd.Flags().StringVar(&agent, "as-agent", "mcp-agent", "without a token: the local agent's name (role agent)")
	cmd.Flags().StringVar(&lines, "lines", "", "without a token: comma-separated line scope of the local agent (default all lines)")
	return cmd
}

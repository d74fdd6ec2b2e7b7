package main

// aml connect opcua|mqtt: live ingest from a line's OPC UA server or MQTT broker.

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/connect/mqtt"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/spf13/cobra"
)

func newConnectCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "connect", Short: "Ingest live from a line: OPC UA subscriptions or MQTT topics (docs/connectors.md)"}
	cmd.AddCommand(newConnectOPCUACmd(a), newConnectMQTTCmd(a), newConnectStatusCmd(a))
	return cmd
}

// runFor runs fn until the command is interrupted or d (if > 0) elapses.
func runFor(parent context.Context, d time.Duration, fn func(ctx context.Context) error) error {
	ctx := parent
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, d)
		defer cancel()
	}
	return fn(ctx)
}

func newConnectOPCUACmd(a *app) *cobra.Command {
	var endpoint, mapFile, passwordEnv string
	var sec opcua.Security
	var forDur, statusEvery time.Duration
	cmd := &cobra.Command{
		Use:   "opcua --endpoint opc.tcp://HOST:PORT --map FILE",
		Short: "Subscribe to an OPC UA server's nodes and ingest their values with run context",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if endpoint == "" || mapFile == "" {
				return usagef("--endpoint and --map are required")
			}
			raw, err := os.ReadFile(mapFile)
			if err != nil {
				return usagef("--map: %v", err)
			}
			m, err := opcua.ParseMap(raw)
			if err != nil {
				return err
			}
			if passwordEnv != "" {
				sec.Password = os.Getenv(passwordEnv)
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			c, err := opcua.New(s, opcua.Options{Endpoint: endpoint, Map: m, Security: sec, Audit: s, Logger: a.log})
			if err != nil {
				return err
			}
			rep, err := c.Reporter(statusStore(s), statusEvery, a.log)
			if err != nil {
				return err
			}
			t0 := time.Now()
			if err := connect.RunReported(cmd.Context(), rep, func(ctx context.Context) error { return runFor(ctx, forDur, c.Run) }, a.log); err != nil {
				return err
			}
			st := c.Stats()
			return a.emit(st, func(w io.Writer) {
				secs := time.Since(t0).Seconds()
				fmt.Fprintf(w, "%s: %d values received, %d stored (%.0f/s), %d malformed, %d runs, %d gaps, %d connects\n",
					endpoint, st.Received, st.Stored, float64(st.Stored)/secs, st.Malformed, st.Runs, len(st.Gaps), st.Connects)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&endpoint, "endpoint", "", "OPC UA endpoint URL (opc.tcp://...)")
	fl.StringVar(&mapFile, "map", "", "map file (JSON): OPC UA node → AML node, context, run tag")
	fl.StringVar(&sec.Policy, "security-policy", "None", "security policy: None, Basic256Sha256, Aes128_Sha256_RsaOaep, ...")
	fl.StringVar(&sec.Mode, "security-mode", "None", "message security mode: None, Sign, SignAndEncrypt")
	fl.StringVar(&sec.User, "user", "", "user name (empty: anonymous)")
	fl.StringVar(&passwordEnv, "password-env", "", "environment variable holding the password")
	fl.StringVar(&sec.CertFile, "cert", "", "client certificate file (for a secured channel)")
	fl.StringVar(&sec.KeyFile, "key", "", "client private key file")
	fl.DurationVar(&forDur, "for", 0, "stop after this long (0: until interrupted)")
	fl.DurationVar(&statusEvery, "status-every", connect.DefaultStatusInterval, "write the connector's status row this often (aml connect status, aml serve)")
	return cmd
}

func newConnectMQTTCmd(a *app) *cobra.Command {
	var broker, mapFile, user, passwordEnv, clientID string
	var forDur, statusEvery time.Duration
	cmd := &cobra.Command{
		Use:   "mqtt --broker tcp://HOST:PORT --map FILE",
		Short: "Subscribe to MQTT topics (QoS 1) and ingest their JSON payloads",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if broker == "" || mapFile == "" {
				return usagef("--broker and --map are required")
			}
			raw, err := os.ReadFile(mapFile)
			if err != nil {
				return usagef("--map: %v", err)
			}
			m, err := mqtt.ParseMap(raw)
			if err != nil {
				return err
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			o := mqtt.Options{Broker: broker, Map: m, ClientID: clientID, User: user, Audit: s, Logger: a.log}
			if passwordEnv != "" {
				o.Password = os.Getenv(passwordEnv)
			}
			c, err := mqtt.New(s, o)
			if err != nil {
				return err
			}
			rep, err := c.Reporter(statusStore(s), statusEvery, a.log)
			if err != nil {
				return err
			}
			if err := connect.RunReported(cmd.Context(), rep, func(ctx context.Context) error { return runFor(ctx, forDur, c.Run) }, a.log); err != nil {
				return err
			}
			st := c.Stats()
			return a.emit(st, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %d values received, %d stored, %d malformed (not stored), %d connects, %d disconnects\n",
					broker, st.Received, st.Stored, st.Stats.Malformed, st.Connects, st.Disconnects)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&broker, "broker", "", "broker URL (tcp://host:port)")
	fl.StringVar(&mapFile, "map", "", "map file (JSON): topic → AML node, payload path, time field")
	fl.StringVar(&clientID, "client-id", "", "client id of the persistent session (default aml-<line>)")
	fl.StringVar(&user, "user", "", "user name")
	fl.StringVar(&passwordEnv, "password-env", "", "environment variable holding the password")
	fl.DurationVar(&forDur, "for", 0, "stop after this long (0: until interrupted)")
	fl.DurationVar(&statusEvery, "status-every", connect.DefaultStatusInterval, "write the connector's status row this often (aml connect status, aml serve)")
	return cmd
}

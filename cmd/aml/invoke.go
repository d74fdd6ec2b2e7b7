package main

// One path for every command that has a use case in internal/app: the
// command builds the op's request from its flags and arguments, invoke runs
// it — on the local data directory's App, or with --server through the API
// route that names the op (api.RouteTable) — and the command prints the
// answer. The request and the answer are the same Go types in both modes,
// so the human output and the --json document are the same too.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/render"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// localActor is who acts on a local data directory: the actor flag's
// value, else the OS user.
func localActor(by string) string {
	if by = strings.TrimSpace(by); by != "" {
		return by
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "aml"
}

// needs lists what an op needs beyond the store.
func opNeeds(name string) (runner, key bool) {
	switch name {
	case "job.submit", "job.cancel", "job.retry", "calibrate", "trainer.list", "trainer.show", "benefit.run":
		runner = true
	}
	return runner, strings.HasPrefix(name, "cert.") || (strings.HasPrefix(name, "steptest.") && name != "steptest.plan")
}

// application is the App over the local data directory, with what op
// needs opened (the job system and the signing key only for the ops that
// use them).
func (a *app) application(ctx context.Context, op string) (*amlapp.App, error) {
	runner, key := opNeeds(op)
	if err := a.checkDataDir(); err != nil {
		return nil, err
	}
	p := a.process()
	if _, err := p.Store(ctx); err != nil {
		return nil, err
	}
	if runner {
		if _, err := p.Jobs(ctx, false, 1); err != nil {
			return nil, err
		}
	}
	if key {
		if _, err := p.Key(ctx); err != nil {
			return nil, err
		}
	}
	if op == "audit.verify" {
		// The signed checkpoints are checked with the data directory's
		// key when it has one (read, never created: verifying writes
		// nothing).
		if err := p.ExistingKey(); err != nil {
			return nil, err
		}
	}
	if a.appl == nil {
		a.appl = amlapp.New(p.Opened(), a.appOptions())
	}
	return a.appl, nil
}

// invoke runs the op named name with req (a pointer to its request type)
// and stores the answer in out (a pointer to its response type). actorFlag
// names the command's actor flag (--by, --as), "" when it has none. On an
// error the answer may still be filled (a denied write's result).
func (a *app) invoke(cmd *cobra.Command, name, actorFlag string, req, out any) error {
	ctx := cmd.Context()
	if a.remote.server != "" {
		c, err := a.remoteClient(cmd)
		if err != nil {
			return err
		}
		if actorFlag != "" {
			if err := a.remoteActor(ctx, c, cmd, actorFlag); err != nil {
				return err
			}
		}
		return c.Call(ctx, name, req, out)
	}
	ap, err := a.application(ctx, name)
	if err != nil {
		return err
	}
	by := ""
	if actorFlag != "" {
		if f := cmd.Flags().Lookup(actorFlag); f != nil {
			by = f.Value.String()
		}
	}
	p := auth.Principal{Name: localActor(by), Role: auth.RoleAdmin, Local: true}
	res, err := ap.Call(ctx, p, name, req)
	if res != nil {
		if rv := reflect.ValueOf(res); out != nil && rv.IsValid() {
			ov := reflect.ValueOf(out).Elem()
			if rv.Type().AssignableTo(ov.Type()) {
				ov.Set(rv)
			} else if rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Type().AssignableTo(ov.Type()) {
				ov.Set(rv.Elem())
			}
		}
	}
	return err
}

// asFlag declares --as PERSON, who acts (recorded in the audit log;
// default the OS user), and --by, its older spelling (hidden): one value.
func asFlag(fl *pflag.FlagSet, usage string) {
	var v string
	fl.StringVar(&v, "as", "", usage)
	fl.AddFlag(&pflag.Flag{Name: "by", Usage: "the older spelling of --as", Value: fl.Lookup("as").Value, Hidden: true})
}

// annotOp is the cobra annotation naming the op a command calls.
const annotOp = "aml.op"

// routed marks cmd as calling op through a.invoke (bindRemote then lets
// it run under --server).
func routed(cmd *cobra.Command, op string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotOp] = op
	return cmd
}

// prepare runs build, then the request's own validation: a failure about
// one of the command's flags is a usage error naming the flag (the same
// with and without --server); any other is left for the op to report.
func prepare(cmd *cobra.Command, req any, build func(args []string) error, args []string) error {
	if build != nil {
		if err := build(args); err != nil {
			return err
		}
	}
	v, ok := req.(amlapp.Validator)
	if !ok {
		return nil
	}
	var ae *core.Error
	if err := v.Validate(); errors.As(err, &ae) && ae.Field != "" {
		norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }
		field := norm(ae.Field)
		var flag string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if n := norm(f.Name); n == field || n+"id" == field {
				flag = f.Name
			}
		})
		if flag != "" {
			return usagef("--%s: %s", flag, ae.Message)
		}
	}
	return nil
}

// arg0 is a build function that sets *p to the first argument.
func arg0(p *string) func([]string) error {
	return func(args []string) error { *p = args[0]; return nil }
}

// opCommand is a command that builds the request of op from its flags and
// arguments (build), invokes it and prints the answer: the op's rendering
// (internal/render, the text an MCP tool returns too), or with --json the
// answer (a list op's items). actorFlag is the command's actor flag (""
// for none).
func opCommand(a *app, cmd *cobra.Command, op, actorFlag string, req any, build func(args []string) error) *cobra.Command {
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := prepare(c, req, build, args); err != nil {
			return err
		}
		resp, err := a.call(c, op, actorFlag, req)
		if err != nil {
			return err
		}
		return a.show(op, req, resp)
	}
	return routed(cmd, op)
}

// call invokes op and returns its answer, a value of the op's response
// type (filled in part beside some errors: a denied write's result).
func (a *app) call(cmd *cobra.Command, op, actorFlag string, req any) (any, error) {
	o, ok := amlapp.Lookup(op)
	if !ok {
		return nil, core.Errorf(core.CodeInternal, "no op %q", op)
	}
	p := reflect.New(o.Resp)
	err := a.invoke(cmd, op, actorFlag, req, p.Interface())
	return p.Elem().Interface(), err
}

// show prints op's answer: with --json the answer itself (a list op's
// items, [] for none: an answer with an Items list), else its rendering.
// docs/cli-json.md states the rule.
func (a *app) show(op string, req, resp any) error {
	doc := resp
	if v := reflect.ValueOf(resp); v.Kind() == reflect.Struct && v.FieldByName("Items").Kind() == reflect.Slice {
		if items := v.FieldByName("Items"); items.IsNil() {
			doc = reflect.MakeSlice(items.Type(), 0, 0).Interface()
		} else {
			doc = items.Interface()
		}
	}
	return a.emit(doc, func(w io.Writer) { render.Text(w, op, req, resp) })
}

// instantFlag declares an optional time flag (epoch ms or RFC 3339).
func instantFlag(fl *pflag.FlagSet, p **amlapp.Instant, name, usage string) {
	fl.Var(opt[amlapp.Instant]{p, func(s string) (amlapp.Instant, error) { var i amlapp.Instant; return i, i.Set(s) }}, name, usage)
}

// opt is a flag whose value is "not given" (nil) unless set: a request
// field that keeps the stored value when left out.
type opt[T any] struct {
	p     **T
	parse func(string) (T, error)
}

func (o opt[T]) Set(s string) error {
	v, err := o.parse(s)
	if err == nil {
		*o.p = &v
	}
	return err
}

func (o opt[T]) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return fmt.Sprint(**o.p)
}

func (o opt[T]) Type() string { return "value" }

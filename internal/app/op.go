package app

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// Op describes one use case: its name (the MCP tool and route table name
// it), the action the principal needs, whether it takes a heavy slot, a
// one-line summary and its request and response types.
type Op struct {
	Name  string
	Act   auth.Action
	Heavy bool
	// SlotInBody: the use case takes its heavy slot itself (takeSlot),
	// after the checks that must answer without waiting for one
	// (steptest.execute: a test that is running or executed answers
	// AML_CONFLICT at once); run releases it all the same.
	SlotInBody bool
	Summary    string
	// Req and Resp are the request and response types (structs).
	Req, Resp reflect.Type

	call func(a *App, ctx context.Context, p Principal, req any) (any, error)
}

// Validator is a request that checks itself before its use case runs.
type Validator interface{ Validate() error }

// run is the one path every use case takes: role check, validation, heavy
// slot, then the use case itself.
func run[Req, Resp any](ctx context.Context, a *App, p Principal, op *Op, req Req, fn func(context.Context, Principal, Req) (Resp, error)) (out Resp, err error) {
	// Every outcome reaches the observers, refusals included (with the
	// time spent, a slot wait included).
	t0 := time.Now()
	defer func() { a.done(op.Name, time.Since(t0), out, err) }()
	if err := p.Allow(op.Act, ""); err != nil {
		return out, err
	}
	// A name with an invisible character could pass for another person's
	// (four-eyes): it never acts (the CLI's --as, a token's name).
	if err := core.CheckName("actor", p.Name); err != nil {
		return out, err
	}
	if v, ok := any(&req).(Validator); ok {
		if err := v.Validate(); err != nil {
			return out, err
		}
	}
	if op.Heavy {
		held := &heldSlot{}
		defer func() {
			if held.release != nil && !held.kept {
				held.release()
			}
		}()
		ctx = context.WithValue(ctx, slotKey{}, held)
		if !op.SlotInBody {
			if err := a.takeSlot(ctx); err != nil {
				return out, err
			}
		}
	}
	return fn(ctx, p, req)
}

// takeSlot takes the heavy slot of this call (an op with SlotInBody
// calls it when its checks passed), waiting for one; a no-op when the
// call is not heavy or holds its slot already.
func (a *App) takeSlot(ctx context.Context) error {
	held, _ := ctx.Value(slotKey{}).(*heldSlot)
	if held == nil || held.release != nil {
		return nil
	}
	release, err := a.acquire(ctx)
	if err != nil {
		return err
	}
	held.release = release
	return nil
}

type slotKey struct{}

// heldSlot is the heavy slot run took for a call.
type heldSlot struct {
	release func()
	kept    bool
}

// keepSlot hands the heavy slot run took for this call to the use case,
// which then releases it itself (one that goes on in the background
// after the call answers: steptest.execute); a no-op release when the
// call holds none. The use case calls it in the call's goroutine.
func keepSlot(ctx context.Context) func() {
	held, _ := ctx.Value(slotKey{}).(*heldSlot)
	if held == nil || held.release == nil {
		return func() {}
	}
	held.kept = true
	return held.release
}

// bind fills op's types and its reflective entry point from the method
// expression m (e.g. (*App).DatasetBuild).
func bind[Req, Resp any](op *Op, m func(*App, context.Context, Principal, Req) (Resp, error)) *Op {
	op.Req = reflect.TypeFor[Req]()
	op.Resp = reflect.TypeFor[Resp]()
	op.call = func(a *App, ctx context.Context, p Principal, req any) (any, error) {
		r, ok := req.(Req)
		if !ok {
			if pr, isPtr := req.(*Req); isPtr && pr != nil {
				r = *pr
			} else {
				return nil, core.Errorf(core.CodeInternal, "%s: request of type %T, want %s", op.Name, req, op.Req)
			}
		}
		return m(a, ctx, p, r)
	}
	return op
}

// allOps is every use case, listed explicitly by group (no init-time
// registration: what the application can do is read here).
func allOps() []*Op {
	var out []*Op
	for _, group := range [][]*Op{dataOps(), lineOps(), batchOps(), mlOps(), contentOps(), compareOps(), twinOps(), sceneOps(), govOps(), envelopeOps(), stepTestOps(), overviewOps(), checkOps(), benefitOps(), trialViewOps()} {
		out = append(out, group...)
	}
	return out
}

var (
	opsOnce  sync.Once
	opsList  []*Op
	opsByKey map[string]*Op
)

func loadOps() {
	opsOnce.Do(func() {
		opsList = allOps()
		sort.Slice(opsList, func(i, j int) bool { return opsList[i].Name < opsList[j].Name })
		opsByKey = make(map[string]*Op, len(opsList))
		for _, o := range opsList {
			if _, dup := opsByKey[o.Name]; dup {
				panic("app: duplicate op " + o.Name)
			}
			opsByKey[o.Name] = o
		}
	})
}

// Ops lists every use case, by name.
func Ops() []*Op {
	loadOps()
	return append([]*Op(nil), opsList...)
}

// Lookup returns the op named name.
func Lookup(name string) (*Op, bool) {
	loadOps()
	o, ok := opsByKey[name]
	return o, ok
}

// Call runs the op named name with req (a value or pointer of its request
// type): the entry point of the generic adapters.
func (a *App) Call(ctx context.Context, p Principal, name string, req any) (any, error) {
	op, ok := Lookup(name)
	if !ok {
		return nil, core.Errorf(core.CodeNotFound, "no operation %q", name)
	}
	return op.Invoke(ctx, a, p, req)
}

// Invoke runs the op with req (a value or pointer of op.Req).
func (op *Op) Invoke(ctx context.Context, a *App, p Principal, req any) (out any, err error) {
	if op.call == nil {
		return nil, core.Errorf(core.CodeInternal, "op %s is not bound", op.Name)
	}
	out, err = op.call(a, ctx, p, req)
	if err != nil {
		var ae *core.Error
		if !errors.As(err, &ae) {
			err = core.Wrap(core.CodeInternal, err, "%s", op.Name)
		}
	}
	return out, err
}

// NewRequest returns a pointer to a zero request of the op's type.
func (op *Op) NewRequest() any { return reflect.New(op.Req).Interface() }

func (op *Op) String() string {
	return fmt.Sprintf("%s(%s) %s", op.Name, op.Req.Name(), op.Resp.Name())
}

package opcua

import (
	"context"
	"fmt"
	"sync"
	"time"

	gopcua "github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Writer is the twin's guard.Writer over OPC UA: Write writes a Double to
// the node mapped to an AML node and fails on any status but Good; Read
// reads it back (a node the server will not let the client read returns
// guard.ErrReadbackUnsupported, so the guard reports transport-ack). The
// guard compares the readback with what was written (guard.Tolerance)
// and stops the certificate's remaining moves at the first mismatch.
//
// A Writer holds one client connection, opened by DialWriter; it is safe
// for concurrent use. It is only ever used through govern.Execute (see
// govern.ExecuteGoverned), so nothing reaches the line without an approved,
// unexpired certificate passing the guard.
type Writer struct {
	cl    *gopcua.Client
	nodes map[string]*ua.NodeID // AML node -> OPC UA node
	mu    sync.Mutex
}

var _ guard.Writer = (*Writer)(nil)

// DialWriter connects to endpoint with the map's nodes.
func DialWriter(ctx context.Context, endpoint string, m *Map, sec Security) (*Writer, error) {
	c := &Connector{opts: Options{Endpoint: endpoint, Security: sec, Map: m}}
	opts, err := c.clientOptions(ctx, make(chan gopcua.ConnState, 16))
	if err != nil {
		return nil, err
	}
	cl, err := gopcua.NewClient(endpoint, opts...)
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArgument, "OPC UA client: %v", err)
	}
	if err := cl.Connect(ctx); err != nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "connect %s: %v", endpoint, err)
	}
	w := &Writer{cl: cl, nodes: map[string]*ua.NodeID{}}
	for _, e := range m.Nodes {
		nid, _ := ua.ParseNodeID(e.OPCUA)
		w.nodes[e.Node] = nid
	}
	return w, nil
}

// Close closes the connection.
func (w *Writer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return w.cl.Close(ctx)
}

func (w *Writer) node(id string) (*ua.NodeID, error) {
	n, ok := w.nodes[id]
	if !ok {
		return nil, fmt.Errorf("node %q is not in the map", id)
	}
	return n, nil
}

// Write writes value to the node; any status but Good is an error.
func (w *Writer) Write(ctx context.Context, nodeID string, value float64) error {
	nid, err := w.node(nodeID)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	res, err := w.cl.Write(ctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{
		NodeID: nid, AttributeID: ua.AttributeIDValue,
		Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(value)},
	}}})
	if err != nil {
		return fmt.Errorf("write %s: %w", nid, err)
	}
	if len(res.Results) != 1 || res.Results[0] != ua.StatusOK {
		st := ua.StatusBad
		if len(res.Results) > 0 {
			st = res.Results[0]
		}
		return fmt.Errorf("write %s refused by the server: %v", nid, st)
	}
	return nil
}

// Read reads the node's value.
func (w *Writer) Read(ctx context.Context, nodeID string) (float64, error) {
	nid, err := w.node(nodeID)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	res, err := w.cl.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: nid, AttributeID: ua.AttributeIDValue}},
		TimestampsToReturn: ua.TimestampsToReturnBoth, MaxAge: 0})
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", nid, err)
	}
	if len(res.Results) != 1 {
		return 0, fmt.Errorf("read %s: %d results", nid, len(res.Results))
	}
	r := res.Results[0]
	switch r.Status {
	case ua.StatusOK:
	case ua.StatusBadNotReadable, ua.StatusBadUserAccessDenied:
		return 0, fmt.Errorf("read %s: %v: %w", nid, r.Status, guard.ErrReadbackUnsupported)
	default:
		return 0, fmt.Errorf("read %s: %v", nid, r.Status)
	}
	if r.Value == nil {
		return 0, fmt.Errorf("read %s: no value", nid)
	}
	x, ok := number(r.Value.Value())
	if !ok {
		return 0, fmt.Errorf("read %s: not a number: %v", nid, r.Value.Value())
	}
	return x, nil
}

package samples

import (
	"context"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/keycache"
	"github.com/aml-project/aml/internal/store/records"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Keys interns what an ingest transaction's samples refer to — nodes
// (created on first sight) and sample contexts (line, product, recipe,
// run) — through the transaction's caches, which become real only when it
// commits. Conn runs the statements inside the back-end's transaction.
type Keys struct {
	Ctx   context.Context
	Conn  records.Conn
	Nodes *keycache.Tx[string]
	Ctxs  *keycache.Tx[core.ContextFilter]
}

// NodePK returns n's pk, creating the node if it does not exist.
func (k *Keys) NodePK(n core.Node) (pk int64, created bool, err error) {
	if pk, ok := k.Nodes.Get(n.ID); ok {
		return pk, false, nil
	}
	pk, created, err = records.EnsureNode(k.Ctx, k.Conn, n)
	if err != nil {
		return 0, false, err
	}
	k.Nodes.Add(n.ID, pk)
	return pk, created, nil
}

// CtxPK returns the pk of sample context c, interning it. A context of a
// line and a product claims the product for the line, or fails
// (AML_CONFLICT) when another line owns it.
func (k *Keys) CtxPK(c core.ContextFilter) (int64, error) {
	pk, ok := k.Ctxs.Get(c)
	if ok {
		return pk, nil
	}
	switch {
	case c.Line != "" && c.Product != "" && c.Recipe != "":
		// A sample's context uses its recipe and product: the first line
		// to use a recipe or product id owns it (records.ClaimRecipe).
		if err := records.ClaimRecipe(k.Ctx, k.Conn, c.Line, c.Product, c.Recipe); err != nil {
			return 0, err
		}
	case c.Line != "" && c.Product != "":
		if err := records.ClaimProduct(k.Ctx, k.Conn, c.Line, c.Product); err != nil {
			return 0, err
		}
	}
	if _, err := k.Conn.Exec(k.Ctx, `INSERT INTO sample_ctx(line, product, recipe, run) VALUES (?,?,?,?) ON CONFLICT DO NOTHING`,
		c.Line, c.Product, c.Recipe, c.Run); err != nil {
		return 0, sqldb.Err(err, "intern sample context")
	}
	if err := k.Conn.QueryRow(k.Ctx, `SELECT pk FROM sample_ctx WHERE line=? AND product=? AND recipe=? AND run=?`,
		c.Line, c.Product, c.Recipe, c.Run).Scan(&pk); err != nil {
		return 0, sqldb.Err(err, "intern sample context")
	}
	k.Ctxs.Add(c, pk)
	return pk, nil
}

// EnsureNode implements core.IngestTx.
func (k *Keys) EnsureNode(n core.Node) (bool, error) {
	_, created, err := k.NodePK(n)
	return created, err
}

// EnsureRun implements core.IngestTx.
func (k *Keys) EnsureRun(r core.Run) (bool, error) { return records.EnsureRun(k.Ctx, k.Conn, r) }

// Ingester is a back-end's transactional ingest.
type Ingester interface {
	Ingest(ctx context.Context, fn func(tx core.IngestTx) error) error
}

// WriteSamples writes one batch in one ingest transaction
// (core.TimeSeries.WriteSamples).
func WriteSamples(ctx context.Context, s Ingester, samples []core.Sample) (core.WriteStats, error) {
	var st core.WriteStats
	err := s.Ingest(ctx, func(tx core.IngestTx) error {
		var err error
		st, err = tx.Write(samples)
		return err
	})
	if err != nil {
		return core.WriteStats{}, err
	}
	return st, nil
}

// Package pgrelay carries events between the processes that share one
// PostgreSQL database (aml serve, aml worker — on any machine), so that a
// job trained by a worker shows its progress on the serve's event stream,
// its web UI and `aml job submit --wait --server`, and a certificate
// approved through one serve is seen by the clients of another.
//
// It uses PostgreSQL's LISTEN/NOTIFY on one channel: every process sends
// its local events of the relayed kinds (events.Relayed) with pg_notify,
// tagged with its origin id, and listens on a dedicated connection (not a
// pool connection: it is held for the process's life), republishing what
// other origins sent into its own bus with Event.Origin set — which is how
// the sending side knows not to send it back. NOTIFY is delivered after
// the sender's transaction commits and in commit order; it is not durable:
// a process that is not listening misses events, exactly as a client
// connected to the wrong process would. Events are hints for live views;
// the state is always in the database (clients re-read it).
package pgrelay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ChannelPrefix names the NOTIFY channel; the schema the connection uses
// follows it, because LISTEN/NOTIFY is per database while AML's tables
// may live in a schema per plant (?search_path=plant7): deployments
// sharing a database do not see each other's events.
const ChannelPrefix = "aml_events:"

// maxPayload keeps a notification under PostgreSQL's 8000-byte limit; a
// larger event is sent without its Data (and Data["truncated"] = true).
const maxPayload = 7800

type message struct {
	Origin string       `json:"o"`
	Event  events.Event `json:"e"`
}

// Relay runs until its context ends.
type Relay struct {
	pool    *pgxpool.Pool
	bus     *events.Bus
	log     *slog.Logger
	origin  string
	channel string
	// Sent and Received count notifications; Dropped counts local events
	// the sender could not keep up with or failed to send.
	Sent, Received, Dropped atomic.Int64
}

// Start begins relaying between bus and the database behind pool. It
// returns once the listening connection is subscribed, so every event
// another process publishes after Start returns is delivered.
func Start(ctx context.Context, pool *pgxpool.Pool, bus *events.Bus, log *slog.Logger) (*Relay, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	r := &Relay{pool: pool, bus: bus, log: log, origin: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "event relay: read the schema")
	}
	r.channel = ChannelPrefix + schema
	conn, err := r.listen(ctx)
	if err != nil {
		return nil, err
	}
	sub := bus.Subscribe(4096, func(e events.Event) bool { return e.Origin == "" && events.Relayed[e.Kind] })
	go r.send(ctx, sub)
	go r.receive(ctx, conn)
	return r, nil
}

// Origin is this process's id on the channel.
func (r *Relay) Origin() string { return r.origin }

// Channel is the NOTIFY channel this relay uses.
func (r *Relay) Channel() string { return r.channel }

func (r *Relay) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "event relay: connect")
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background()) // dropped: the LISTEN error is what matters
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "event relay: listen")
	}
	return conn, nil
}

func (r *Relay) send(ctx context.Context, sub *events.Sub) {
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			b, err := json.Marshal(message{Origin: r.origin, Event: e})
			if err == nil && len(b) > maxPayload {
				e.Data = map[string]any{"truncated": true}
				b, err = json.Marshal(message{Origin: r.origin, Event: e})
			}
			if err != nil {
				r.Dropped.Add(1)
				continue
			}
			if _, err := r.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, r.channel, string(b)); err != nil {
				if ctx.Err() != nil {
					return
				}
				r.Dropped.Add(1)
				r.log.Warn("event relay: send failed", "kind", e.Kind, "id", e.ID, "err", err)
				continue
			}
			r.Sent.Add(1)
		}
	}
}

// receive republishes other processes' events, reconnecting (with
// backoff) when the listening connection is lost.
func (r *Relay) receive(ctx context.Context, conn *pgx.Conn) {
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background()) // shutting down: nothing is pending on a LISTEN connection
		}
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if conn == nil {
			c, err := r.listen(ctx)
			if err != nil {
				r.log.Warn("event relay: reconnect failed", "err", err, "retry", backoff)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 10*time.Second)
				continue
			}
			conn, backoff = c, 100*time.Millisecond
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("event relay: listening connection lost", "err", err)
			_ = conn.Close(context.Background()) // it is lost already
			conn = nil
			continue
		}
		var m message
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.Origin == "" || m.Origin == r.origin || !events.Relayed[m.Event.Kind] {
			continue
		}
		e := m.Event
		e.Origin = m.Origin
		r.Received.Add(1)
		r.bus.Publish(e)
	}
}

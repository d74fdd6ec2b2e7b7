// Package keycache keeps the surrogate keys both back-ends look up on every
// ingest and query — node id → pk, interned sample context → pk — so that
// a batch of samples costs no key lookups once its nodes are known.
//
// Keys made inside an ingest transaction must not reach the shared cache
// before the transaction commits: a rolled-back transaction would leave a
// pk that does not exist (or that another transaction later gets). A Tx
// therefore collects its new keys and Commit publishes them; a Tx that is
// dropped publishes nothing. Keys are never removed: nodes and contexts are
// not deleted while a store is open.
package keycache

import "sync"

// Cache is a concurrency-safe key → pk map.
type Cache[K comparable] struct {
	mu sync.RWMutex
	m  map[K]int64
}

// New returns an empty cache.
func New[K comparable]() *Cache[K] { return &Cache[K]{m: map[K]int64{}} }

// Get returns k's pk if known.
func (c *Cache[K]) Get(k K) (int64, bool) {
	c.mu.RLock()
	pk, ok := c.m[k]
	c.mu.RUnlock()
	return pk, ok
}

// Put records a committed key (read from the database outside any ingest
// transaction).
func (c *Cache[K]) Put(k K, pk int64) {
	c.mu.Lock()
	c.m[k] = pk
	c.mu.Unlock()
}

// Tx is one ingest transaction's view: the cache plus the keys it made.
type Tx[K comparable] struct {
	c   *Cache[K]
	new map[K]int64
}

// Begin starts a transaction's view of c.
func (c *Cache[K]) Begin() *Tx[K] { return &Tx[K]{c: c, new: map[K]int64{}} }

// Get returns k's pk from the cache or from this transaction's new keys.
func (t *Tx[K]) Get(k K) (int64, bool) {
	if pk, ok := t.c.Get(k); ok {
		return pk, true
	}
	pk, ok := t.new[k]
	return pk, ok
}

// Add records a key made (or first read) inside the transaction.
func (t *Tx[K]) Add(k K, pk int64) { t.new[k] = pk }

// Commit publishes the transaction's keys; call it only after the database
// transaction committed.
func (t *Tx[K]) Commit() {
	if len(t.new) == 0 {
		return
	}
	t.c.mu.Lock()
	for k, v := range t.new {
		t.c.m[k] = v
	}
	t.c.mu.Unlock()
	clear(t.new)
}

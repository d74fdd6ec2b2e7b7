package keycache

import (
	"sync"
	"testing"
)

// TestTxVisibility: a transaction sees its own keys at once; others see
// them only after Commit; a dropped transaction publishes nothing.
func TestTxVisibility(t *testing.T) {
	c := New[string]()
	c.Put("a", 1)
	t1, t2 := c.Begin(), c.Begin()
	t1.Add("b", 2)
	if pk, ok := t1.Get("b"); !ok || pk != 2 {
		t.Fatalf("own key: %d %v", pk, ok)
	}
	if _, ok := t2.Get("b"); ok {
		t.Fatal("another transaction saw an uncommitted key")
	}
	if _, ok := c.Get("b"); ok {
		t.Fatal("the cache holds an uncommitted key")
	}
	t2.Add("c", 3) // dropped: never committed
	t1.Commit()
	if pk, ok := t2.Get("b"); !ok || pk != 2 {
		t.Fatalf("committed key not visible: %d %v", pk, ok)
	}
	if pk, ok := c.Get("a"); !ok || pk != 1 {
		t.Fatalf("put key: %d %v", pk, ok)
	}
	if _, ok := c.Get("c"); ok {
		t.Fatal("a dropped transaction's key reached the cache")
	}
}

// TestConcurrent: many transactions committing and readers reading at
// once (run with -race).
func TestConcurrent(t *testing.T) {
	c := New[int]()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				tx := c.Begin()
				tx.Add(w*1000+i, int64(i))
				tx.Get(i)
				tx.Commit()
				c.Get(w * 1000)
			}
		}()
	}
	wg.Wait()
	for w := range 8 {
		for i := range 200 {
			if pk, ok := c.Get(w*1000 + i); !ok || pk != int64(i) {
				t.Fatalf("key %d: %d %v", w*1000+i, pk, ok)
			}
		}
	}
}

package mqtt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/store/sqlite"
)

// BenchmarkMQTTIngest publishes 20000 QoS 1 messages (JSON with a value
// and a time) to an embedded broker from one publisher and reports the
// samples/s stored by the connector, from the first publish until the
// last sample is committed.
func BenchmarkMQTTIngest(b *testing.B) {
	for range b.N {
		addr := freeAddr(b)
		br := startBroker(b, addr)
		st, err := sqlite.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		m, _ := ParseMap([]byte(testMap))
		c, _ := New(st, Options{Broker: "tcp://" + addr, Map: m, FlushEvery: 50 * time.Millisecond, ClientID: "aml-bench"})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		for !c.Stats().Connected {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		pub := publisher(b, addr)
		const n = 5000
		t0 := time.Now()
		var last interface{ Wait() bool }
		for i := range n {
			last = pub.Publish("l1/w", 1, false, fmt.Sprintf(`{"ts":%d,"data":{"value":%d}}`, 1_767_600_000_000+int64(i)*100, i))
		}
		last.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for c.Stats().Stored < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if s := c.Stats(); s.Stored < n {
			b.Fatalf("stored %d of %d (received %d)", s.Stored, n, s.Received)
		}
		secs := time.Since(t0).Seconds()
		b.ReportMetric(n/secs, "samples/s")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		pub.Disconnect(10)
		br.Close()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

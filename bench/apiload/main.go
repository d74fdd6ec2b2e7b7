// Command apiload is the load generator of bench/api.sh: N concurrent
// clients against a running `aml serve` on loopback for a fixed time,
// mixing JSON ingest batches, snapshots and virtual trials. Every
// acknowledged sample is counted back through the API at the end (paged
// /api/v1/ts) — lost samples fail the run — and p50/p99 latency and
// throughput are printed per kind as JSON.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

type config struct {
	url, token, model, scene, snapshotRun, control string
	at                                             int64
	value                                          float64
	clients, batch                                 int
	duration                                       time.Duration
	mixIngest, mixSnapshot                         float64
}

type stat struct {
	lat    []time.Duration
	errors int
	first  string
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "http://127.0.0.1:8080", "server")
	flag.StringVar(&c.token, "token", "", "engineer or admin token")
	flag.StringVar(&c.model, "model", "", "twin model for snapshots and trials")
	flag.StringVar(&c.scene, "scene", "", "scene id")
	flag.StringVar(&c.snapshotRun, "run", "", "run of the snapshots")
	flag.Int64Var(&c.at, "at", 0, "replay instant of the snapshots (epoch ms)")
	flag.StringVar(&c.control, "control", "", "control moved by the trials")
	flag.Float64Var(&c.value, "value", 0, "its current value (trials move it by up to ±1%)")
	flag.IntVar(&c.clients, "clients", 50, "concurrent clients")
	flag.IntVar(&c.batch, "batch", 200, "samples per ingest batch")
	flag.DurationVar(&c.duration, "duration", 60*time.Second, "how long")
	flag.Float64Var(&c.mixIngest, "mix-ingest", 0.8, "share of ingest requests")
	flag.Float64Var(&c.mixSnapshot, "mix-snapshot", 0.1, "share of snapshot requests (the rest are trials)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "apiload:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	tr := &http.Transport{MaxIdleConns: c.clients * 2, MaxIdleConnsPerHost: c.clients * 2}
	hc := &http.Client{Transport: tr, Timeout: 120 * time.Second}
	post := func(path string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", c.url+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		rb, err := io.ReadAll(res.Body)
		return res.StatusCode, rb, err
	}
	// One stored snapshot for the trials.
	code, body, err := post("/api/v1/snapshots", map[string]any{"scene": c.scene, "run": c.snapshotRun, "at": c.at, "model": c.model, "phase": "holding"})
	if err != nil || code != 201 {
		return fmt.Errorf("initial snapshot: %d %v %s", code, err, body)
	}
	var snap struct {
		Snapshot struct {
			SnapshotID string `json:"snapshotId"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal(body, &snap); err != nil || snap.Snapshot.SnapshotID == "" {
		return fmt.Errorf("initial snapshot: bad response %s: %v", body, err)
	}

	kinds := []string{"ingest", "snapshot", "trial"}
	stats := map[string]*stat{}
	for _, k := range kinds {
		stats[k] = &stat{}
	}
	var mu sync.Mutex
	acked := make([]int64, c.clients) // samples acknowledged per client (node)
	line := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	t0 := time.Now()
	end := t0.Add(c.duration)
	var wg sync.WaitGroup
	for i := 0; i < c.clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			node := fmt.Sprintf("%s_n%02d", line, i)
			var ts int64 = 1_700_000_000_000
			for time.Now().Before(end) {
				x := rng.Float64()
				var kind string
				var body any
				var path string
				var want int
				switch {
				case x < c.mixIngest:
					kind, path, want = "ingest", "/api/v1/ingest/samples", 200
					ss := make([]map[string]any, c.batch)
					for k := range ss {
						ts += 100
						ss[k] = map[string]any{"node": node, "ts": ts, "value": rng.NormFloat64()}
					}
					body = map[string]any{"line": line, "samples": ss}
				case x < c.mixIngest+c.mixSnapshot:
					kind, path, want = "snapshot", "/api/v1/snapshots", 201
					body = map[string]any{"scene": c.scene, "run": c.snapshotRun, "at": c.at, "model": c.model, "phase": "holding"}
				default:
					kind, path, want = "trial", "/api/v1/trials", 201
					body = map[string]any{"model": c.model, "snapshot": snap.Snapshot.SnapshotID, "set": map[string]float64{c.control: c.value * (1 + 0.01*(2*rng.Float64()-1))}}
				}
				t := time.Now()
				code, rb, err := post(path, body)
				d := time.Since(t)
				mu.Lock()
				s := stats[kind]
				s.lat = append(s.lat, d)
				if err != nil || code != want {
					s.errors++
					if s.first == "" {
						s.first = fmt.Sprintf("%d %v %.200s", code, err, rb)
					}
				} else if kind == "ingest" {
					acked[i] += int64(c.batch)
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	wall := time.Since(t0)

	// Count back every client's node through the API.
	var sent, stored int64
	for i := 0; i < c.clients; i++ {
		sent += acked[i]
		node := fmt.Sprintf("%s_n%02d", line, i)
		var after *int64
		for {
			u := c.url + "/api/v1/ts?limit=100000&node=" + node
			if after != nil {
				u += fmt.Sprintf("&after=%d", *after)
			}
			req, _ := http.NewRequest("GET", u, nil)
			req.Header.Set("Authorization", "Bearer "+c.token)
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			var p struct {
				Points      []json.RawMessage `json:"points"`
				HasMore     bool              `json:"hasMore"`
				NextAfterTs int64             `json:"nextAfterTs"`
			}
			err = json.NewDecoder(res.Body).Decode(&p)
			res.Body.Close()
			if err != nil && acked[i] > 0 {
				return fmt.Errorf("count back %s: %d %v", node, res.StatusCode, err)
			}
			stored += int64(len(p.Points))
			if !p.HasMore {
				break
			}
			n := p.NextAfterTs
			after = &n
		}
	}

	out := map[string]any{"clients": c.clients, "seconds": wall.Seconds(), "batch": c.batch, "samplesAcked": sent, "samplesCountedBack": stored,
		"lost": sent - stored}
	total, errs := 0, 0
	for _, k := range kinds {
		s := stats[k]
		sort.Slice(s.lat, func(a, b int) bool { return s.lat[a] < s.lat[b] })
		q := func(p float64) float64 {
			if len(s.lat) == 0 {
				return 0
			}
			return float64(s.lat[min(len(s.lat)-1, int(p*float64(len(s.lat))))].Microseconds()) / 1000
		}
		total += len(s.lat)
		errs += s.errors
		out[k] = map[string]any{"requests": len(s.lat), "errors": s.errors, "firstError": s.first, "p50ms": q(0.50), "p99ms": q(0.99), "maxms": q(1),
			"perSec": float64(len(s.lat)) / wall.Seconds()}
	}
	out["requests"], out["errors"], out["requestsPerSec"] = total, errs, float64(total)/wall.Seconds()
	out["samplesPerSec"] = float64(sent) / wall.Seconds()
	js, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(js))
	if errs > 0 || sent != stored {
		return fmt.Errorf("%d errors, %d samples lost", errs, sent-stored)
	}
	return nil
}

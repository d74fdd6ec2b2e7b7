// Command rawread is the comparison side of bench/dataset.sh: it reads every
// sample of the given runs with a plain prepared, paged SELECT per node and
// run (the same rows a dataset build reads, with no cleaning or windowing)
// and prints the sample count, seconds and samples/s as JSON.
package main

import (
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite"
)

func main() {
	data := flag.String("data", "./aml-data", "data directory")
	recipe := flag.String("recipe", "", "recipe whose ended runs are read")
	nodesFlag := flag.String("nodes", "", "comma-separated node ids")
	page := flag.Int("page", 20000, "page size")
	flag.Parse()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(*data, "aml.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(15000)")
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(1)
	start := time.Now()
	type run struct {
		id         string
		start, end int64
	}
	rows, err := db.Query(`SELECT id, started_ms, ended_ms FROM runs WHERE recipe_id=? AND status='ended' ORDER BY started_ms`, *recipe)
	if err != nil {
		fail(err)
	}
	var runs []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.id, &r.start, &r.end); err != nil {
			fail(err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		fail(err)
	}
	rows.Close()
	st, err := db.Prepare(`SELECT ts, value, state FROM samples WHERE node = ? AND ts > ? AND ts <= ? ORDER BY ts LIMIT ?`)
	if err != nil {
		fail(err)
	}
	n := 0
	for _, r := range runs {
		for _, id := range strings.Split(*nodesFlag, ",") {
			var pk int64
			if err := db.QueryRow(`SELECT pk FROM nodes WHERE id=?`, id).Scan(&pk); err != nil {
				fail(fmt.Errorf("node %s: %v", id, err))
			}
			after := r.start*1000 - 1 // sample times are epoch µs, run bounds epoch ms
			for {
				rs, err := st.Query(pk, after, r.end*1000+999, *page)
				if err != nil {
					fail(err)
				}
				got := 0
				for rs.Next() {
					var ts int64
					var v float64
					var s sql.NullString
					if err := rs.Scan(&ts, &v, &s); err != nil {
						fail(err)
					}
					after = ts
					got++
				}
				if err := rs.Err(); err != nil {
					fail(err)
				}
				rs.Close()
				n += got
				if got < *page {
					break
				}
			}
		}
	}
	secs := time.Since(start).Seconds()
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"runs": len(runs), "samples": n, "seconds": secs, "samplesPerSec": float64(n) / secs}); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rawread:", err)
	os.Exit(1)
}

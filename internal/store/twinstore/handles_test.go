package twinstore_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Two handles on one database are what two AML processes sharing a
// database have (two servers behind a balancer on PostgreSQL; the CLI next
// to a server on SQLite). Nothing in one handle's memory protects the
// other's writes: the compare-and-set transitions, the write claim and the
// audit chain must hold through the database alone — SQLite's file lock
// (BEGIN IMMEDIATE), PostgreSQL's advisory transaction lock (sqldb).

// racers is how many goroutines race in each test; even ones use the first
// handle, odd ones the second.
const racers = 8

// race runs fn(i, handle) in racers goroutines released together and waits
// for all of them.
func race(hs [2]store.Store, fn func(i int, st store.Store)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i, hs[i%2])
		}()
	}
	close(start)
	wg.Wait()
}

func TestTwoHandlesApproveRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, k := twFixture(t, b)
		s2 := b.again(t, s)
		ctx := context.Background()
		id := twIssue(t, s, k, "trial-1").Cert.RecommendationID
		approvers := []string{"bob", "carol", "dave", "erin"}
		errs := make([]error, racers)
		race([2]store.Store{s, s2}, func(i int, st store.Store) {
			_, errs[i] = st.ApproveCertificate(ctx, id, approvers[i%len(approvers)], k.Public, twT0.Add(time.Minute))
		})
		winner := -1
		for i, err := range errs {
			switch core.CodeOf(err) {
			case "":
				if winner >= 0 {
					t.Fatalf("approvals %d and %d both won", winner, i)
				}
				winner = i
			case core.CodeConflict:
			default:
				t.Fatalf("approval %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("no approval won: %v", errs)
		}
		// Both handles read the one approval, by the winner.
		for _, st := range []store.Store{s, s2} {
			r, err := st.GetCertificate(ctx, id, k.Public)
			if err != nil || r.Cert.Status != contract.CertApproved || r.Cert.ApprovedBy != approvers[winner%len(approvers)] {
				t.Fatalf("%v %+v", err, r)
			}
		}
		es, err := s2.AuditLog().List(ctx, 0, 100, id)
		if err != nil || len(es) != 2 || es[0].Action != twinstore.AuditCertIssue || es[1].Action != twinstore.AuditCertApprove {
			t.Fatalf("audit of %s: %v %+v", id, err, es)
		}
		if res, err := audit.New(s.SQL()).Verify(ctx); err != nil || !res.OK {
			t.Fatalf("verify: %v %+v", err, res)
		}
	})
}

func TestTwoHandlesClaimWriteRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _ := twFixture(t, b)
		s2 := b.again(t, s)
		ctx := context.Background()
		if _, err := s.RecordWrite(ctx, "ops", contract.WriteRow{WriteRecord: twinWrite(0)}); err != nil {
			t.Fatal(err)
		}
		last, err := s2.LastWriteID(ctx, twLine)
		if err != nil || last == 0 {
			t.Fatalf("last write id: %v %d", err, last)
		}
		// Every racer checked the same history (last) and claims the line for
		// its own certificate: one claim may follow that history, the others
		// must see it grew.
		ids := make([]int64, racers)
		errs := make([]error, racers)
		race([2]store.Store{s, s2}, func(i int, st store.Store) {
			ids[i], errs[i] = st.ClaimWrite(ctx, contract.WriteClaimRequest{LineID: twLine, CertificateID: fmt.Sprintf("rec-%d", i),
				RunID: "r", Actor: "carol", At: twT0.Add(time.Hour), ExpectLastWriteID: last})
		})
		winner := -1
		for i, err := range errs {
			switch core.CodeOf(err) {
			case "":
				if winner >= 0 {
					t.Fatalf("claims %d and %d both won", winner, i)
				}
				winner = i
			case core.CodeConflict:
			default:
				t.Fatalf("claim %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("no claim won: %v", errs)
		}
		rows, err := s.WriteRows(ctx, twLine, time.Time{})
		if err != nil || len(rows) != 2 || rows[1].ID != ids[winner] || rows[1].ID <= last ||
			rows[1].Outcome != contract.WriteClaim || rows[1].CertificateID != fmt.Sprintf("rec-%d", winner) {
			t.Fatalf("history after the race (winner %d, id %d): %v %+v", winner, ids[winner], err, rows)
		}
		// One write.start entry, the winner's; the chain verifies.
		es, err := s2.AuditLog().List(ctx, 0, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var starts []string
		for _, e := range es {
			if e.Action == twinstore.AuditWriteStart {
				starts = append(starts, e.Subject)
			}
		}
		if len(starts) != 1 || starts[0] != fmt.Sprintf("rec-%d", winner) {
			t.Fatalf("write.start entries %v, want only rec-%d", starts, winner)
		}
		if res, err := audit.New(s.SQL()).Verify(ctx); err != nil || !res.OK || res.Entries != int64(len(es)) {
			t.Fatalf("verify: %v %+v (listed %d)", err, res, len(es))
		}
	})
}

// twinWrite is the i-th write of a test history on twLine.
func twinWrite(i int) contract.WriteRecord {
	return contract.WriteRecord{LineID: twLine, NodeID: "hold_pressure", CertificateID: "rec-0", RunID: "r",
		At: twT0.Add(time.Duration(i) * time.Minute), Value: 64 + float64(i), Delta: 1}
}

func TestTwoHandlesAuditAppendRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		s2 := b.again(t, s)
		ctx := context.Background()
		const each = 10
		seqs := make([][]int64, racers)
		errs := make([]error, racers)
		race([2]store.Store{s, s2}, func(i int, st store.Store) {
			for j := range each {
				var e audit.Entry
				var err error
				// Half append through the store's method, half through a log
				// on its handle: both are one write transaction.
				if j%2 == 0 {
					e, err = st.AppendAudit(ctx, fmt.Sprintf("actor-%d", i), "test.append", fmt.Sprintf("s-%d-%d", i, j), twLine, map[string]any{"i": i, "j": j})
				} else {
					e, err = audit.New(st.SQL()).Append(ctx, fmt.Sprintf("actor-%d", i), "test.append", fmt.Sprintf("s-%d-%d", i, j), twLine, map[string]any{"i": i, "j": j})
				}
				if err != nil {
					errs[i] = err
					return
				}
				seqs[i] = append(seqs[i], e.Seq)
			}
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("appender %d: %v", i, err)
			}
		}
		// Every append got its own seq, 1..n without gaps, and each
		// appender's entries are in the order it appended them.
		var all []int64
		for i, ss := range seqs {
			if !sort.SliceIsSorted(ss, func(a, b int) bool { return ss[a] < ss[b] }) {
				t.Fatalf("appender %d: seqs out of order %v", i, ss)
			}
			all = append(all, ss...)
		}
		sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
		for k, q := range all {
			if q != int64(k+1) {
				t.Fatalf("seqs %v: want 1..%d each once", all, racers*each)
			}
		}
		for _, st := range []store.Store{s, s2} {
			res, err := audit.New(st.SQL()).Verify(ctx)
			if err != nil || !res.OK || res.Entries != int64(racers*each) {
				t.Fatalf("verify: %v %+v, want ok with %d entries", err, res, racers*each)
			}
		}
	})
}

// TestFutureWriteIsClockFault: the write history is kept on the wall
// clock; a row dated after it (beyond contract.WriteClockTolerance) is
// refused at insert with AML_CLOCK_FAULT — a record or a claim — and
// nothing is stored or audited. (The future date is far enough ahead that
// no real clock reaches it.)
func TestFutureWriteIsClockFault(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _ := twFixture(t, b)
		ctx := context.Background()
		future := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
		w := twinWrite(0)
		w.At = future
		_, err := s.RecordWrite(ctx, "ops", contract.WriteRow{WriteRecord: w})
		if core.CodeOf(err) != core.CodeClockFault || !strings.Contains(err.Error(), "after the wall clock") {
			t.Fatalf("future write: %v", err)
		}
		_, err = s.ClaimWrite(ctx, contract.WriteClaimRequest{LineID: twLine, CertificateID: "rec-f", RunID: "r", Actor: "carol", At: future})
		if core.CodeOf(err) != core.CodeClockFault {
			t.Fatalf("future claim: %v", err)
		}
		rows, err := s.WriteRows(ctx, twLine, time.Time{})
		if err != nil || len(rows) != 0 {
			t.Fatalf("history after refused future rows: %v %+v", err, rows)
		}
		if _, err := s.RecordWrite(ctx, "ops", contract.WriteRow{WriteRecord: twinWrite(0)}); err != nil {
			t.Fatalf("a past write: %v", err)
		}
	})
}

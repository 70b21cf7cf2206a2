package peers

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// ycsbtDump reads PostgreSQL's YCSB-T back as the workload's records.
func ycsbtDump(t *testing.T, db *PGTxn) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	rows, err := db.Pool().Query(t.Context(), "SELECT k, counter, filler FROM ycsbt")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, c int64
		var filler []byte
		if err := rows.Scan(&k, &c, &filler); err != nil {
			t.Fatal(err)
		}
		out[string(workload.YCSBTKey(uint64(k)))] = append(binary.BigEndian.AppendUint64(nil, uint64(c)), filler...)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

func TestPGYCSBT(t *testing.T) {
	needPostgres(t)
	db := startPGTxn(t, 8)
	ctx := t.Context()

	t.Run("like-for-like", func(t *testing.T) {
		w := &workload.YCSBT{Keys: 200, Zipf: 0.9}
		y, err := LoadPGYCSBT(ctx, db, w)
		if err != nil {
			t.Fatal(err)
		}
		ref := txntest.NewMemDB()
		if err := w.Load(ctx, ref, workload.TxnLoad{}); err != nil {
			t.Fatal(err)
		}
		var keys [][]byte
		for k := range uint64(w.NumKeys()) {
			keys = append(keys, workload.YCSBTKey(k))
		}
		sameData(t, readAll(t, ref, keys), ycsbtDump(t, db))
		sameOutcome(t, w, draw(w, 500, 9),
			func(ctx context.Context, op workload.YCSBTOp) (int64, error) { return w.Exec(ctx, ref, op) },
			func(ctx context.Context, op workload.YCSBTOp) (int64, error) { return y.Exec(ctx, nil, op) })
		sameData(t, readAll(t, ref, keys), ycsbtDump(t, db))
	})

	// Eight clients on zipf-0.99 keys: every committed write is counted
	// once.
	t.Run("concurrent", func(t *testing.T) {
		w := &workload.YCSBT{Keys: 1000, Zipf: 0.99}
		y, err := LoadPGYCSBT(ctx, db, w)
		if err != nil {
			t.Fatal(err)
		}
		var writes atomic.Int64
		exec := func(ctx context.Context, s *workload.TxnSession, op workload.YCSBTOp) (int64, error) {
			d, err := y.Exec(ctx, s, op)
			if err == nil {
				writes.Add(int64(op.N))
			}
			return d, err
		}
		res, err := workload.RunTxnFunc(ctx, workload.TxnRun{Threads: 8, Duration: time.Second, Seed: 5}, w, exec)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d committed (%.0f/s), aborts %v, p50 %v p99 %v", res.Committed, res.Rate(), res.Aborts, res.P50, res.P99)
		if res.Failed != 0 || res.Committed == 0 {
			t.Fatalf("%d committed, %d failed: %v", res.Committed, res.Failed, res.FirstErr)
		}
		sum, err := y.Sum(ctx)
		if err != nil || sum != writes.Load() {
			t.Errorf("counters add up to %d (%v), want the %d committed writes", sum, err, writes.Load())
		}
		if res.TotalAborts() == 0 {
			t.Error("no abort retried on zipf-0.99 keys")
		}
	})
}

package peers

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/rdmakit/rdmakit/workload"
)

// PGYCSBT is YCSB-T on PostgreSQL: one table ycsbt (k → counter, filler),
// each transaction reading its keys in one SELECT and writing every one
// back with its counter plus one, at SERIALIZABLE isolation on a PGTxn,
// running the same operations (workload.YCSBTOp) the workload draws for
// rdmakit's protocols. A record's value in rdmakit's stores is the
// counter (8 bytes, big-endian) followed by the filler.
type PGYCSBT struct {
	db *PGTxn
	w  *workload.YCSBT
}

// YCSB-T's schema and statements.
var ycsbtSchema = []string{
	"DROP TABLE IF EXISTS ycsbt",
	"CREATE TABLE ycsbt (k bigint PRIMARY KEY, counter bigint NOT NULL, filler bytea NOT NULL)",
}

const (
	ycsbtRead  = "SELECT k, counter FROM ycsbt WHERE k = ANY($1)"
	ycsbtWrite = "INSERT INTO ycsbt (k, counter, filler) VALUES ($1, $2, $3) " +
		"ON CONFLICT (k) DO UPDATE SET counter = excluded.counter, filler = excluded.filler"
)

// LoadPGYCSBT makes YCSB-T's table on db's server (dropping an earlier
// one) and loads w's records with COPY, as workload.YCSBT.Load writes
// them: counter 0, the filler bytes i = i (mod 256) for i from 8.
func LoadPGYCSBT(ctx context.Context, db *PGTxn, w *workload.YCSBT) (*PGYCSBT, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := execAll(ctx, db, ycsbtSchema); err != nil {
		return nil, fmt.Errorf("ycsb-t: schema: %w", err)
	}
	n := int(w.NumKeys())
	filler := ycsbtFiller(w.Size())
	rows := pgx.CopyFromSlice(n, func(i int) ([]any, error) { return []any{int64(i), int64(0), filler}, nil })
	got, err := db.pool.CopyFrom(ctx, pgx.Identifier{"ycsbt"}, []string{"k", "counter", "filler"}, rows)
	if err != nil {
		return nil, fmt.Errorf("ycsb-t: copy: %w", err)
	}
	if got != int64(n) {
		return nil, fmt.Errorf("ycsb-t: copy: %d rows of %d", got, n)
	}
	if err := execAll(ctx, db, []string{"ANALYZE ycsbt"}); err != nil {
		return nil, fmt.Errorf("ycsb-t: %w", err)
	}
	return &PGYCSBT{db: db, w: w}, nil
}

// ycsbtFiller is a value's bytes after the counter, as the workload
// writes them.
func ycsbtFiller(size int) []byte {
	f := make([]byte, size-8)
	for i := range f {
		f[i] = byte(i + 8)
	}
	return f
}

// Exec runs op in a SERIALIZABLE transaction, again while the server
// aborts it (each abort counted in s, which may be nil): one SELECT of
// its keys, then every key written back with its counter plus one in one
// batch, in key order (a key with no row gets one, counter 1). The delta is 0. Exec is
// a workload.TxnExec.
func (y *PGYCSBT) Exec(ctx context.Context, s *workload.TxnSession, op workload.YCSBTOp) (int64, error) {
	if op.N <= 0 || op.N > workload.YCSBTMaxKeys {
		return 0, fmt.Errorf("ycsb-t: operation of %d keys (1 to %d)", op.N, workload.YCSBTMaxKeys)
	}
	// Written in key order, so that two transactions never wait for each
	// other's row locks in a cycle (the server would find the deadlock
	// only after deadlock_timeout, a second).
	keys := make([]int64, op.N)
	for i, k := range op.Keys[:op.N] {
		keys[i] = int64(k)
	}
	slices.Sort(keys)
	filler := ycsbtFiller(y.w.Size())
	err := y.db.run(ctx, s, statements, func(tx querier) error {
		counters := make(map[int64]int64, op.N)
		rows, err := tx.Query(ctx, ycsbtRead, keys)
		if err != nil {
			return err
		}
		var k, c int64
		if _, err := pgx.ForEachRow(rows, []any{&k, &c}, func() error { counters[k] = c; return nil }); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, k := range keys {
			b.Queue(ycsbtWrite, k, counters[k]+1, filler)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, fmt.Errorf("ycsb-t: %w", err)
	}
	return 0, nil
}

// Sum returns the counters of every record added up: the number of
// writes committed since loading.
func (y *PGYCSBT) Sum(ctx context.Context) (int64, error) {
	var sum int64
	if err := y.db.pool.QueryRow(ctx, "SELECT coalesce(sum(counter), 0)::bigint FROM ycsbt").Scan(&sum); err != nil {
		return 0, fmt.Errorf("ycsb-t: sum: %w", err)
	}
	return sum, nil
}

package peers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// PGTxn runs transactions on a PostgreSQL server the way an application
// that needs serializability does: a pool of connections (pgxpool), one
// per client, each transaction at SERIALIZABLE isolation (PostgreSQL's
// SSI) in plain SQL statements, run again while the server aborts it
// with a serialization failure (SQLSTATE 40001) or a deadlock (40P01).
// A transaction of several statements is BEGIN … COMMIT; one of a single
// statement is that statement alone (autocommit: the server runs it as a
// transaction of its own), serializable too, since every connection sets
// default_transaction_isolation to serializable.
// Every such abort is counted, in PGTxn's Stats and in the session of
// workload.RunTxnFunc that ran the transaction (40001 as
// txn.ValidationFailed: SSI found a dangerous structure or a concurrent
// update; 40P01 as txn.LockConflict). It is safe for concurrent use; the
// workloads' SQL peers (PGSmallBank, PGTATP, PGYCSBT) run on it.
type PGTxn struct {
	pool *pgxpool.Pool
	st   pgTxnCounters
}

// pgTxnCounters are PGTxn's counts, updated as transactions end.
type pgTxnCounters struct {
	commits, rejected, serialization, deadlocks atomic.Uint64
}

// PGTxnStats counts what PGTxn's transactions did.
type PGTxnStats struct {
	// Commits are the transactions that committed.
	Commits uint64
	// Rejected are the transactions rolled back by their own logic
	// (SmallBank's payment without the funds, TATP's missing rows).
	Rejected uint64
	// SerializationFailures are the attempts the server aborted with
	// SQLSTATE 40001 (then run again).
	SerializationFailures uint64
	// Deadlocks are the attempts the server aborted with SQLSTATE 40P01
	// (then run again).
	Deadlocks uint64
}

// Aborts are the attempts the server aborted.
func (s PGTxnStats) Aborts() uint64 { return s.SerializationFailures + s.Deadlocks }

// ErrPGMissingRow is wrapped by the error of a transaction that did not
// find a row its workload loaded (a customer id out of the population,
// or tables not loaded).
var ErrPGMissingRow = errors.New("postgres: row missing")

// SQLSTATEs PGTxn retries.
const (
	sqlStateSerialization = "40001"
	sqlStateDeadlock      = "40P01"
)

// Bounds of PGTxn's waits between attempts of an aborted transaction:
// randomized, doubling from the first to the last (a server round trip
// on a unix socket takes some 20 µs).
const (
	pgMinBackoff = 20 * time.Microsecond
	pgMaxBackoff = 5 * time.Millisecond
)

// OpenPGTxn opens a pool of conns connections to the server at
// connString (Postgres.ConnString), all of them connected before it
// returns (a measured run does not pay for connecting).
func OpenPGTxn(ctx context.Context, connString string, conns int) (*PGTxn, error) {
	if conns < 1 {
		return nil, fmt.Errorf("postgres: a pool of %d connections", conns)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.MaxConns = int32(conns)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	held := make([]*pgxpool.Conn, 0, conns)
	for err == nil && len(held) < conns {
		var c *pgxpool.Conn
		if c, err = pool.Acquire(ctx); err == nil {
			held = append(held, c)
		}
	}
	for _, c := range held {
		c.Release() // before Close, which waits for them
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connection %d of %d: %w", len(held)+1, conns, err)
	}
	return &PGTxn{pool: pool}, nil
}

// Pool is the connection pool (for loading and checking data).
func (p *PGTxn) Pool() *pgxpool.Pool { return p.pool }

// Stats returns the counts so far.
func (p *PGTxn) Stats() PGTxnStats {
	return PGTxnStats{
		Commits:               p.st.commits.Load(),
		Rejected:              p.st.rejected.Load(),
		SerializationFailures: p.st.serialization.Load(),
		Deadlocks:             p.st.deadlocks.Load(),
	}
}

// Close closes every connection.
func (p *PGTxn) Close() { p.pool.Close() }

// querier runs statements: a pgx.Tx inside BEGIN … COMMIT, the pool for a
// transaction of one statement.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// shape says how a transaction reaches the server.
type shape uint8

const (
	// statements: BEGIN ISOLATION LEVEL SERIALIZABLE, the statements,
	// COMMIT (ROLLBACK when the function fails).
	statements shape = iota
	// oneStatement: the function runs one statement, which is its own
	// transaction (one round trip).
	oneStatement
)

// run runs fn as a SERIALIZABLE transaction of shape sh and commits it,
// again while the server aborts it, until it commits, fn returns another
// error (the transaction is rolled back; one wrapping
// workload.ErrRejected is counted as a rejection), or ctx ends. Aborts
// are counted in s too (nil: none).
func (p *PGTxn) run(ctx context.Context, s *workload.TxnSession, sh shape, fn func(querier) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.Serializable}
	wait := pgMinBackoff
	for {
		var err error
		if sh == oneStatement {
			err = fn(p.pool)
		} else {
			err = pgx.BeginTxFunc(ctx, p.pool, opts, func(tx pgx.Tx) error { return fn(tx) })
		}
		switch {
		case err == nil:
			p.st.commits.Add(1)
			return nil
		case errors.Is(err, workload.ErrRejected):
			p.st.rejected.Add(1)
			return err
		case !p.countAbort(s, err):
			return fmt.Errorf("postgres: %w", err)
		}
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("postgres: %w (%w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, pgMaxBackoff)
	}
}

// countAbort counts err (in p and in s, if not nil) if the server
// aborted the transaction for a serialization failure or a deadlock, and
// reports whether it did.
func (p *PGTxn) countAbort(s *workload.TxnSession, err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	var r txn.Reason
	switch pe.Code {
	case sqlStateSerialization:
		p.st.serialization.Add(1)
		r = txn.ValidationFailed
	case sqlStateDeadlock:
		p.st.deadlocks.Add(1)
		r = txn.LockConflict
	default:
		return false
	}
	if s != nil {
		s.Abort(r)
	}
	return true
}

// execAll runs statements one after the other outside transactions.
func execAll(ctx context.Context, db *PGTxn, stmts []string) error {
	for _, s := range stmts {
		if _, err := db.pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// stmt is an SQL statement and its arguments.
type stmt struct {
	sql  string
	args []any
}

// st is the statement sql with args.
func st(sql string, args ...any) stmt { return stmt{sql, args} }

// execBatch sends statements that each change one row in one round trip
// (a pgx batch) and fails when one changes none.
func execBatch(ctx context.Context, tx querier, stmts ...stmt) error {
	if len(stmts) == 1 {
		tag, err := tx.Exec(ctx, stmts[0].sql, stmts[0].args...)
		return oneRow(tag.RowsAffected(), err, stmts[0])
	}
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s.sql, s.args...)
	}
	res := tx.SendBatch(ctx, b)
	for _, s := range stmts {
		tag, err := res.Exec()
		if err := oneRow(tag.RowsAffected(), err, s); err != nil {
			res.Close()
			return err
		}
	}
	return res.Close()
}

// oneRow returns err, or an error wrapping ErrPGMissingRow when the
// statement changed no row.
func oneRow(rows int64, err error, s stmt) error {
	if err != nil {
		return err
	}
	if rows != 1 {
		return fmt.Errorf("%w: %q %v changed %d rows", ErrPGMissingRow, s.sql, s.args, rows)
	}
	return nil
}

// Package txn is rdmakit's distributed transactions on remote memory: the
// DB and Tx interfaces every protocol implements, the limits and errors
// they share, and Run, which retries aborted transactions (docs/txn.md).
// Records live in tables sharded over memory nodes by a hash of their key
// (Shard); each record carries its version and lock metadata in the
// node's memory, where a one-sided READ reaches it. The protocols live in
// the subpackages: txn/farm (lock, validate, commit to backups, commit to
// primaries: primary-backup replication, FaRM) and txn/prismtx (PRISM-TX:
// timestamps, validation by enhanced CAS, installation by ALLOCATE and a
// greater-than CAS chain, no server CPU).
//
// A transaction is serializable: every committed transaction appears to
// run alone at one point of a total order, and an aborted one leaves
// nothing visible. Begin starts one; Get, Put, Insert and Delete read and
// buffer writes; Commit makes the writes visible or returns an error
// wrapping ErrAborted, after which the caller may run the transaction
// again (Run does that).
package txn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rdmakit/rdmakit/kv"
)

// Limits of keys and values.
const (
	MaxKey   = 64
	MaxValue = 4 << 10
)

// Errors of transactions. Protocols wrap them with %w.
var (
	// ErrAborted: the transaction did not commit and left nothing
	// visible; running it again may succeed. The error that wraps it is
	// an *AbortError that says why.
	ErrAborted = errors.New("txn: aborted")
	// ErrNotFound: Get or Delete of a key that has no record.
	ErrNotFound = errors.New("txn: not found")
	// ErrExists: Insert of a key that has a record.
	ErrExists = errors.New("txn: key exists")
	// ErrTooLarge: an empty key, a key longer than MaxKey or a value
	// longer than MaxValue.
	ErrTooLarge = errors.New("txn: key or value too large")
	// ErrFull: a table or a node has no room for a new record.
	ErrFull = errors.New("txn: full")
	// ErrUnreachable: a memory node does not answer or its connection
	// failed. The transaction's outcome is the protocol's to state: a
	// Commit that returns ErrUnreachable may have committed (as a
	// database's lost connection at COMMIT).
	ErrUnreachable = errors.New("txn: node unreachable")
	// ErrDone: an operation on a transaction that already committed or
	// aborted.
	ErrDone = errors.New("txn: transaction finished")
	// ErrClosed: the DB is closed.
	ErrClosed = errors.New("txn: closed")
)

// Reason says why a transaction aborted.
type Reason uint8

// Reasons of aborts.
const (
	// LockConflict: a record to write was locked (or prepared) by another
	// transaction.
	LockConflict Reason = iota + 1
	// ValidationFailed: a record read changed (or was prepared by a
	// writer) before commit.
	ValidationFailed
	// Timeout: a lock or an answer did not come within the protocol's
	// bound, or the transaction's context ended before it committed.
	Timeout
	// UserAbort: the application called Abort (or its Run function
	// returned an error).
	UserAbort
)

// String names the reason as the docs and experiment tables do.
func (r Reason) String() string {
	switch r {
	case LockConflict:
		return "lock-conflict"
	case ValidationFailed:
		return "validation-failed"
	case Timeout:
		return "timeout"
	case UserAbort:
		return "user-abort"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// AbortError is the error of an aborted transaction: errors.Is(err,
// ErrAborted) holds, Reason says why and Key (when there is one) names
// the record that caused it.
type AbortError struct {
	Reason Reason
	Key    []byte
	Err    error // the underlying cause, if any (a context error for Timeout)
}

// Abort returns an *AbortError for reason r on key (nil for none) caused
// by err (nil for none).
func Abort(r Reason, key []byte, err error) *AbortError {
	return &AbortError{Reason: r, Key: key, Err: err}
}

// Error says why and where.
func (e *AbortError) Error() string {
	s := "txn: aborted: " + e.Reason.String()
	if e.Key != nil {
		s += fmt.Sprintf(" on key %q", e.Key)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrAborted) hold.
func (e *AbortError) Is(target error) bool { return target == ErrAborted }

// Unwrap returns the underlying cause.
func (e *AbortError) Unwrap() error { return e.Err }

// ReasonOf returns the reason of an aborted transaction's error, 0 when
// err is not an abort.
func ReasonOf(err error) Reason {
	var ae *AbortError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return 0
}

// DB is a transactional database client: a protocol's connection to its
// memory nodes. Its methods are safe for concurrent use; each Tx is used
// by one goroutine at a time.
type DB interface {
	// Begin starts a transaction; ctx bounds all of it, Commit included.
	Begin(ctx context.Context) (Tx, error)
	// Close releases the client. Transactions under way fail.
	Close() error
}

// Tx is one transaction. Reads see the transaction's own writes; other
// transactions see its writes only once Commit returned nil.
type Tx interface {
	// Get returns the value of key (a copy the caller owns), or
	// ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Put sets the value of key, creating its record if it has none.
	Put(key, value []byte) error
	// Insert creates key's record; ErrExists if it has one (at commit
	// at the latest).
	Insert(key, value []byte) error
	// Delete removes key's record; ErrNotFound if it has none.
	Delete(key []byte) error
	// Commit makes the writes visible atomically and returns nil, or
	// aborts the transaction and returns an error wrapping ErrAborted
	// (or ErrUnreachable: see there).
	Commit() error
	// Abort ends the transaction without writing anything. Calling it
	// after Commit does nothing.
	Abort()
}

// Access is one record a committed transaction read or wrote, at one
// version. A record's versions are totally ordered (the order its writes
// were installed in); version 0 is the record before any transaction
// wrote it (absent, or as loaded).
type Access struct {
	Key     string
	Version uint64
	Deleted bool // a write that deleted the record, or a read that found none
}

// Traced is a Tx that reports, after Commit returned nil, the version of
// every record it read and the version its writes installed: what
// check.Serializable builds the serialization graph from. Every protocol's
// Tx implements it.
type Traced interface {
	Trace() (reads, writes []Access)
}

// Check returns ErrTooLarge (wrapped) when key or value is out of limits.
func Check(key, value []byte) error {
	if len(key) == 0 || len(key) > MaxKey {
		return fmt.Errorf("%w: a %d-byte key (1 to %d)", ErrTooLarge, len(key), MaxKey)
	}
	if len(value) > MaxValue {
		return fmt.Errorf("%w: a %d-byte value (at most %d)", ErrTooLarge, len(value), MaxValue)
	}
	return nil
}

// Hash is the 64-bit hash every protocol places keys with: the key-value
// stores' (kv.Hash, stable across processes and hosts).
func Hash(key []byte) uint64 { return kv.Hash(key) }

// Shard returns the shard (0 to shards-1) that holds key.
func Shard(key []byte, shards int) int {
	return int(Hash(key) % uint64(shards))
}

// Backoff bounds Run's waits between attempts.
const (
	minBackoff = 2 * time.Microsecond
	maxBackoff = 2 * time.Millisecond
)

// Run runs fn in a transaction of db and commits it, again and again
// while it aborts (with randomized exponential backoff between attempts),
// until it commits, fn returns an error that is not an abort, or ctx
// ends. It returns nil once a run committed; fn's own error (the
// transaction aborted); or the last abort wrapped with ctx's error.
// fn may run several times: it must not have effects outside tx.
func Run(ctx context.Context, db DB, fn func(Tx) error) error {
	wait := minBackoff
	for {
		err := attempt(ctx, db, fn)
		if err == nil || !errors.Is(err, ErrAborted) || ReasonOf(err) == UserAbort {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

// attempt runs fn once in a new transaction.
func attempt(ctx context.Context, db DB, fn func(Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Abort()
		return err
	}
	return tx.Commit()
}

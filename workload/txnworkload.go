package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"strconv"

	"github.com/rdmakit/rdmakit/txn"
)

// TxnWorkload is a transaction workload (SmallBank, TATP, YCSBT) with
// operations of type O: Next draws one, a plain value that says
// everything the transaction will do (its kind, its records, the
// amounts and values it writes), so that a peer that is not a txn.DB (a
// SQL database) can run the same operation natively; Exec runs it on a
// txn.DB through txn.Run.
type TxnWorkload[O any] interface {
	// Next draws the next operation with r, the calling goroutine's own
	// source. Next is safe for concurrent use with distinct sources.
	Next(r *rand.Rand) O
	// Kinds names the kinds of operation, in the order KindOf numbers
	// them.
	Kinds() []string
	// KindOf returns the index in Kinds of op's kind.
	KindOf(op O) int
	// Exec runs op in a transaction of db until it commits, retrying
	// aborts (txn.Run). It returns the change op made to the total of
	// the workload's balances (SmallBank's money; 0 for the others), or
	// an error: one wrapping ErrRejected when the transaction's own logic
	// rolled it back (nothing was written), ctx's when the run ended.
	Exec(ctx context.Context, db txn.DB, op O) (delta int64, err error)
}

// ErrRejected: a transaction's own logic rolled it back, as the
// workload's specification says it sometimes must (SmallBank's
// SendPayment without the funds; TATP's updates, inserts and deletes of
// call forwarding whose row is missing or already there). Nothing was
// written; running it again would give the same answer, so RunTxn counts
// it apart from commits and does not retry it.
var ErrRejected = errors.New("workload: transaction rejected by its own logic")

// appendKey appends a record's key: the table's name and the record's
// ids in decimal, separated by slashes ("sb.chk/42", "tatp.cf/7/2/16").
// Decimal keeps keys readable in the checker's reports; every key stays
// far below txn.MaxKey.
func appendKey(dst []byte, table string, ids ...uint64) []byte {
	dst = append(dst, table...)
	for _, id := range ids {
		dst = append(dst, '/')
		dst = strconv.AppendUint(dst, id, 10)
	}
	return dst
}

// getInt64 reads a record holding one fixed-width integer (8 bytes,
// big-endian, two's complement). A record of another size is an error
// wrapping ErrCorrupt.
func getInt64(tx txn.Tx, key []byte) (int64, error) {
	v, err := tx.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, corrupt(key, len(v), 8)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// putInt64 writes a record holding one fixed-width integer.
func putInt64(tx txn.Tx, key []byte, n int64) error {
	return tx.Put(key, binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(n)))
}

// ErrCorrupt: a record read back does not have the workload's layout
// (another workload's data under the same key, or a protocol that
// returned wrong bytes).
var ErrCorrupt = errors.New("workload: record has the wrong layout")

// corrupt says which record had which size.
func corrupt(key []byte, got, want int) error {
	return &CorruptError{Key: string(key), Size: got, Want: want}
}

// CorruptError is the error of a record whose size is not its table's;
// errors.Is(err, ErrCorrupt) holds.
type CorruptError struct {
	Key        string
	Size, Want int
}

// Error says which record.
func (e *CorruptError) Error() string {
	return "workload: record " + strconv.Quote(e.Key) + " holds " + strconv.Itoa(e.Size) +
		" bytes, want " + strconv.Itoa(e.Want)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

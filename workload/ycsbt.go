package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sync"

	"github.com/pingcap/go-ycsb/pkg/generator"

	"github.com/rdmakit/rdmakit/txn"
)

// YCSBT is YCSB-T as Meerkat's benchClient runs it and PRISM's Fig. 10
// measures it: every transaction reads a few keys and writes each one
// back (read-modify-write, Meerkat's "INC"), keys drawn uniformly or by
// zipf. A value is ValueSize bytes whose first 8 are a big-endian counter
// that each write increments (the rest is filler), so a run's writes can
// be counted back.
//
// Records are txn keys "ycsbt/<n>", n from 0 to Keys-1. Zipf draws use
// go-ycsb's generator.Zipfian (Gray et al.'s algorithm) with the
// constant given; its popular items are the low key numbers, which the
// protocols spread over shards by hashing the key (txn.Shard) anyway.
// (go-ycsb's ScrambledZipfian would sum ten billion terms for any
// constant but 0.99.) A YCSBT keeps its generators: use it by pointer.
type YCSBT struct {
	// Keys is the number of records (default 100,000).
	Keys int64
	// MinKeys and MaxKeys bound the keys per transaction, drawn
	// uniformly between them (defaults 1 and 4; at most YCSBTMaxKeys).
	MinKeys, MaxKeys int
	// Zipf is the zipf constant, 0 for uniform keys (else between 0 and
	// 1 exclusive: 0.5 to 0.99 in PRISM's figure).
	Zipf float64
	// ValueSize is a value's bytes (default 56, Meerkat's; at least 8).
	ValueSize int

	once  sync.Once
	zetan float64
	pool  sync.Pool // *generator.Zipfian: each keeps a last value, so one per goroutine at a time
}

// YCSBTMaxKeys bounds the keys of one YCSB-T transaction.
const YCSBTMaxKeys = 16

// YCSBTTable is YCSB-T's table name.
const YCSBTTable = "ycsbt"

// YCSBTOp is one drawn YCSB-T transaction: it reads and increments
// Keys[:N], distinct key numbers.
type YCSBTOp struct {
	N    int
	Keys [YCSBTMaxKeys]uint64
}

// YCSBTKey returns the key of record n.
func YCSBTKey(n uint64) []byte { return appendKey(nil, YCSBTTable, n) }

// NumKeys returns the number of records (Keys, or its default).
func (y *YCSBT) NumKeys() int64 {
	if y.Keys > 0 {
		return y.Keys
	}
	return 100_000
}

// keyRange returns the bounds of keys per transaction.
func (y *YCSBT) keyRange() (lo, hi int) {
	lo, hi = y.MinKeys, y.MaxKeys
	if lo <= 0 {
		lo = 1
	}
	if hi <= 0 {
		hi = 4
	}
	hi = min(hi, YCSBTMaxKeys, int(min(y.NumKeys(), YCSBTMaxKeys)))
	return min(lo, hi), hi
}

// Size returns a value's bytes (ValueSize, or its default).
func (y *YCSBT) Size() int {
	if y.ValueSize > 0 {
		return max(y.ValueSize, 8)
	}
	return 56
}

// Validate reports a configuration Next and Exec cannot run.
func (y *YCSBT) Validate() error {
	if y.Zipf < 0 || y.Zipf >= 1 || math.IsNaN(y.Zipf) {
		return fmt.Errorf("workload: YCSB-T zipf constant %v (want 0 for uniform, or between 0 and 1)", y.Zipf)
	}
	if y.Size() > txn.MaxValue {
		return fmt.Errorf("workload: YCSB-T values of %d bytes: %w", y.Size(), txn.ErrTooLarge)
	}
	if y.MinKeys > YCSBTMaxKeys || y.MaxKeys > YCSBTMaxKeys || (y.MaxKeys > 0 && y.MinKeys > y.MaxKeys) {
		return fmt.Errorf("workload: YCSB-T %d to %d keys per transaction (at most %d)", y.MinKeys, y.MaxKeys, YCSBTMaxKeys)
	}
	return nil
}

// Kinds names YCSB-T's one transaction.
func (y *YCSBT) Kinds() []string { return []string{"RMW"} }

// KindOf returns 0: every YCSB-T transaction is a read-modify-write.
func (y *YCSBT) KindOf(YCSBTOp) int { return 0 }

// zipfian returns a generator for the calling goroutine (put it back
// with y.pool.Put). The zeta constant of the key range is computed once
// (it sums Keys terms); each generator is then made in constant time.
func (y *YCSBT) zipfian() *generator.Zipfian {
	if z, ok := y.pool.Get().(*generator.Zipfian); ok {
		return z
	}
	n := y.NumKeys()
	y.once.Do(func() {
		for i := int64(1); i <= n; i++ {
			y.zetan += 1 / math.Pow(float64(i), y.Zipf)
		}
	})
	return generator.NewZipfian(0, n-1, y.Zipf, y.zetan)
}

// key draws one key number.
func (y *YCSBT) key(r *rand.Rand) uint64 {
	if y.Zipf == 0 {
		return uint64(r.Int63n(y.NumKeys()))
	}
	z := y.zipfian()
	n := z.Next(r)
	y.pool.Put(z)
	if n < 0 || n >= y.NumKeys() { // a constant Validate refuses
		n = 0
	}
	return uint64(n)
}

// Next draws a transaction: MinKeys to MaxKeys distinct keys.
func (y *YCSBT) Next(r *rand.Rand) YCSBTOp {
	lo, hi := y.keyRange()
	op := YCSBTOp{N: lo + r.Intn(hi-lo+1)}
	for i := 0; i < op.N; i++ {
	draw:
		k := y.key(r)
		for _, prev := range op.Keys[:i] {
			if prev == k {
				goto draw
			}
		}
		op.Keys[i] = k
	}
	return op
}

// Exec runs op on db (txn.Run: retried until it commits): each key is
// read, then written back with its counter plus one. A key with no
// record (not loaded) is created with counter 1. The delta is 0.
func (y *YCSBT) Exec(ctx context.Context, db txn.DB, op YCSBTOp) (int64, error) {
	if op.N <= 0 || op.N > YCSBTMaxKeys {
		return 0, fmt.Errorf("workload: YCSB-T operation of %d keys (1 to %d)", op.N, YCSBTMaxKeys)
	}
	if err := y.Validate(); err != nil {
		return 0, err
	}
	size := y.Size()
	keys := make([][]byte, op.N)
	kbuf := make([]byte, 0, op.N*(len(YCSBTTable)+21))
	for i, k := range op.Keys[:op.N] {
		start := len(kbuf)
		kbuf = appendKey(kbuf, YCSBTTable, k)
		keys[i] = kbuf[start:len(kbuf):len(kbuf)]
	}
	values := make([]byte, op.N*size)
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		vals := values
		for _, key := range keys {
			var count uint64
			v, err := tx.Get(key)
			switch {
			case err == nil && len(v) >= 8:
				count = binary.BigEndian.Uint64(v)
			case err == nil:
				return corrupt(key, len(v), size)
			case !errors.Is(err, txn.ErrNotFound):
				return err
			}
			val := vals[:size:size]
			vals = vals[size:]
			binary.BigEndian.PutUint64(val, count+1)
			for i := 8; i < size; i++ {
				val[i] = byte(i)
			}
			if err := tx.Put(key, val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("workload: YCSB-T: %w", err)
	}
	return 0, nil
}

package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/go-ycsb/pkg/prop"
	"github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/rdmakit/rdmakit/blockstore"
)

// BlockDB adapts a blockstore.Store to go-ycsb's DB, for YCSB over block
// ids: record N is block N and its one field the block's bytes, so a
// read is a Read of the block and an update or insert a Write of it. The
// run must set YCSB.OrderedKeys (record N is named "user<N>") and
// ValueSize to the block size, on a volume of at least Records+1 blocks:
// go-ycsb v1.0.1's scrambled zipfian draws record numbers 0 to Records,
// both included (YCSB's Java client draws again past the last record
// loaded; go-ycsb does not), so block Records is read without having
// been loaded, as a key-value run misses that key. As DB does, a
// thread that InitThread set up reads into its own buffers, reused by
// its next Read. Every block store a benchmark compares goes through
// this adapter.
type BlockDB struct {
	Store blockstore.Store
}

var _ ycsb.DB = BlockDB{}

// BlockID returns the block id of a record's key: its number.
func BlockID(key string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimPrefix(key, prop.KeyPrefixDefault), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: key %q names no block (run with YCSB.OrderedKeys)", blockstore.ErrOutOfRange, key)
	}
	return id, nil
}

// Close implements ycsb.DB (the store stays open: its owner closes it).
func (BlockDB) Close() error { return nil }

// InitThread implements ycsb.DB: the thread's buffers.
func (BlockDB) InitThread(ctx context.Context, _, _ int) context.Context {
	return context.WithValue(ctx, threadKey{}, &thread{record: make(map[string][]byte, 1)})
}

// CleanupThread implements ycsb.DB.
func (BlockDB) CleanupThread(context.Context) {}

// Read implements ycsb.DB. With InitThread's buffers the record is valid
// until the thread's next Read.
func (d BlockDB) Read(ctx context.Context, _ string, key string, _ []string) (map[string][]byte, error) {
	id, err := BlockID(key)
	if err != nil {
		return nil, err
	}
	t, _ := ctx.Value(threadKey{}).(*thread)
	if t == nil {
		v, err := d.Store.Read(ctx, id, nil)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"field0": v}, nil
	}
	v, err := d.Store.Read(ctx, id, t.value[:0])
	if err != nil {
		return nil, err
	}
	t.value = v
	t.record["field0"] = v
	return t.record, nil
}

// Scan implements ycsb.DB: block stores have no scans.
func (BlockDB) Scan(context.Context, string, string, int, []string) ([]map[string][]byte, error) {
	return nil, ErrNoScan
}

// Update implements ycsb.DB: a Write of the whole block.
func (d BlockDB) Update(ctx context.Context, _ string, key string, values map[string][]byte) error {
	id, err := BlockID(key)
	if err != nil {
		return err
	}
	return d.Store.Write(ctx, id, value(values))
}

// Insert implements ycsb.DB: a Write, as Update.
func (d BlockDB) Insert(ctx context.Context, table string, key string, values map[string][]byte) error {
	return d.Update(ctx, table, key, values)
}

// ErrNoDelete: a block cannot be deleted, only written.
var ErrNoDelete = errors.New("workload: blocks cannot be deleted")

// Delete implements ycsb.DB.
func (BlockDB) Delete(context.Context, string, string) error { return ErrNoDelete }

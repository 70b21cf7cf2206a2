package farm

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/txn"
)

// SetHook makes db call h at each commit step; false stops the
// coordinator there (its Commit returns ErrStopped).
func SetHook(db *DB, h func(Step) bool) { db.hook = h }

// ErrStopped is the error of a commit a hook stopped.
var ErrStopped = errStopped

// CopyOf returns node n's copy of shard s, key → "version:value" of
// every present object, or nil when n holds no copy of s.
func (n *Node) CopyOf(s int) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.layout.copyOf(n.index, s)
	if c < 0 {
		return nil
	}
	out := map[string]string{}
	for i := range n.layout.Buckets {
		o, ok := decodeSlot(n.slot(c, i), n.layout.ValueSize)
		if ok && o.klen > 0 && o.present {
			out[string(o.key)] = fmt.Sprintf("%d:%s", o.version(), o.value)
		}
	}
	return out
}

// InDoubtTrace is tx's trace whether or not its Commit returned nil: for
// a transaction whose coordinator a hook stopped and that recovery
// committed.
func InDoubtTrace(tx *Tx) (reads, writes []txn.Access) {
	tx.traced = true
	defer func() { tx.traced = false }()
	return tx.Trace()
}

// TxID names tx at the nodes: its coordinator and number.
func TxID(tx *Tx) (client, seq uint64) { return tx.db.id, tx.seq }

// Applied reports whether node n applied transaction (client, seq) to a
// backup copy: it committed.
func (n *Node) Applied(client, seq uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.applied.has(txKey{client, seq})
}

// ClientID is db's coordinator id at the nodes.
func ClientID(db *DB) uint64 { return db.id }

// LocksOf is how many transactions of client hold locks at n.
func (n *Node) LocksOf(client uint64) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for k := range n.locks {
		if k.client == client {
			c++
		}
	}
	return c
}

// AppendAbort writes an abort record for seq into db's ring at node i.
func AppendAbort(ctx context.Context, db *DB, i int, seq uint64) error {
	c, err := db.conn(i)
	if err != nil {
		return err
	}
	return c.appendRecord(ctx, &record{kind: recAbort, shard: i, seq: seq})
}

// AppendBackup writes a COMMIT-BACKUP record of shard (backed up at node
// i) for seq with one write of a value of vlen bytes.
func AppendBackup(ctx context.Context, db *DB, i, shard int, seq uint64, vlen int) error {
	c, err := db.conn(i)
	if err != nil {
		return err
	}
	n := db.layout.Shards()
	return c.appendRecord(ctx, &record{kind: recCommitBackup, shard: shard, seq: seq,
		info:   txInfo{parts: []int{shard}, sids: make([]uint32, n)},
		writes: []write{{op: opPut, version: seq, key: []byte(fmt.Sprintf("k%d", seq%50)), value: make([]byte, vlen)}}})
}

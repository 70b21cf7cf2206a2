package prismtx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// ErrKeyCollision: two keys of a shard have the same 64-bit identity
// hash, so the table cannot tell their slots apart; the second one's
// operations fail with it (about one pair in 10^8 among a million keys).
var ErrKeyCollision = errors.New("prismtx: key identity collision")

// probeWindow is how many slots a lookup reads per round trip, and
// maxProbe how far from its home slot a key may be.
const (
	probeWindow = 8
	maxProbe    = 1024
)

// lookup returns key's slot in its shard: from the DB's cache, or by
// probing from its home slot (linear probing, probeWindow slots per READ)
// and claiming the first empty slot for it. Slots never become empty
// again, so every client probing for one key passes the same claimed
// slots and meets at the same empty one, where one CAS decides; a key
// found once is in that slot for good, and the cache is never stale.
// Each READ costs one round trip (added to *rounds), the claim another.
func (db *DB) lookup(ctx context.Context, key []byte, rounds *int) (*conn, *keyInfo, error) {
	c := db.shard(key)
	if v, ok := db.keys.Load(string(key)); ok {
		return c, v.(*keyInfo), nil
	}
	id := keyID(key)
	slots := int(c.lay.Slots)
	start := db.home(key, c)
	for probed := 0; probed < min(maxProbe, slots); {
		i := (start + probed) % slots
		n := min(probeWindow, slots-i, min(maxProbe, slots)-probed)
		ch, err := c.acquire(ctx, 1)
		if err != nil {
			return nil, nil, err
		}
		ch.sgl[0] = ch.sge(offItem, n*slotSize)
		ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: c.lay.slot(i), RKey: c.lay.RKey, SGL: ch.sgl[:1]}
		*rounds++
		if _, err := ch.run(ctx); err != nil {
			return nil, nil, err
		}
		ids := make([]uint64, n)
		for j := range n {
			ids[j] = binary.NativeEndian.Uint64(ch.buf[offItem+j*slotSize+offKeyID:])
		}
		ch.release()
		for j, got := range ids {
			if got == 0 {
				owner, err := db.claimSlot(ctx, c, i+j, id, rounds)
				if err != nil {
					return nil, nil, err
				}
				got = owner
			}
			if got == id {
				ki := &keyInfo{slot: i + j}
				v, _ := db.keys.LoadOrStore(string(key), ki)
				return c, v.(*keyInfo), nil
			}
		}
		probed += n
	}
	return nil, nil, fmt.Errorf("%w: no slot for key %q within %d of its home", txn.ErrFull, key, maxProbe)
}

// claimSlot CASes key id into empty slot i and returns the slot's owner:
// id when the claim won, or the key another client claimed it for.
func (db *DB) claimSlot(ctx context.Context, c *conn, i int, id uint64, rounds *int) (uint64, error) {
	ch, err := c.acquire(ctx, 1)
	if err != nil {
		return 0, err
	}
	ch.sgl[0] = ch.sge(offOld, 8)
	ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, RemoteAddr: c.lay.slot(i) + offKeyID, RKey: c.lay.RKey, SGL: ch.sgl[:1]}
	ch.wrs[0].Atomic.Compare[0], ch.wrs[0].Atomic.Swap[0] = 0, id
	*rounds++
	if _, err := ch.run(ctx); err != nil {
		return 0, err
	}
	old := binary.NativeEndian.Uint64(ch.buf[offOld:])
	ch.release()
	if old == 0 {
		return id, nil
	}
	return old, nil
}

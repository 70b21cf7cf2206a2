package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// The PRISM-RS region of a volume (one region, so that an indirect READ
// follows a slot to its buffer under one rkey):
//
//	[0 : 16·Blocks)        slots ⟨buffer address u64, tag u64⟩, native order
//	zeroOff = ↑64          the zero buffer: tag 0 and BlockSize zero bytes
//	ringOff = ↑64          the return ring (prism.ReturnRing)
//	poolOff = ↑BufSize     ⟨tag | data⟩ buffers (prism.Pool, one class)
//
// A buffer is BufHead bytes of tag (little-endian) then the block's data,
// in a power-of-two buffer of BufSize bytes.
const (
	// SlotSize is the bytes of a block's slot.
	SlotSize = 16
	// BufHead is the tag that starts a buffer.
	BufHead = 8
	// lockStripes is how many locks guard the blocks of the RPC store.
	lockStripes = 256
)

// BufSize is the size of the buffers of a volume of bs-byte blocks.
func BufSize(bs int) int { return 1 << bits.Len(uint(BufHead+bs-1)) }

// volume is a replica's copy of a volume: the PRISM-RS region clients
// reach by one-sided operations, and the store the RPC methods use.
type volume struct {
	info Info
	mr   verbs.MR
	pool *prism.Pool
	ring *prism.ReturnRing
	cfg  Config

	// The RPC store (MethodRead, MethodWrite): a tag and data per block,
	// each block under its stripe's lock; made at its first use (a volume
	// written by PRISM-RS never needs it).
	locks [lockStripes]sync.Mutex
	made  sync.Once
	tags  []Tag
	data  []byte

	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
	cpu    *atomic.Int64
}

// volumeBytes is the memory a volume of l takes on a replica configured
// by cfg: the region (slots, zero buffer, ring, a buffer per block and
// cfg.Spare more) and the RPC store.
func volumeBytes(l blockstore.Layout, cfg Config) (o offsets, total uint64) {
	buf := uint64(BufSize(l.BlockSize))
	o.zero = (SlotSize*l.Blocks + 63) &^ 63
	o.ring = (o.zero + buf + 63) &^ 63
	o.pool = (o.ring + uint64(prism.ReturnRingSize(cfg.ReturnSlots)) + buf - 1) / buf * buf
	o.region = o.pool + (l.Blocks+uint64(cfg.Spare))*buf
	return o, o.region + l.Blocks*uint64(BufHead+l.BlockSize)
}

// offsets are where the parts of a volume's region start, and its size.
type offsets struct{ zero, ring, pool, region uint64 }

// newVolume lays out a volume of l in a new region of pd and starts its
// restock loop.
func newVolume(pd verbs.PD, l blockstore.Layout, cfg Config, cpu *atomic.Int64) (*volume, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	if l.BlockSize > cfg.MaxBlockSize {
		return nil, fmt.Errorf("%w: %d-byte blocks, this replica takes at most %d", blockstore.ErrBlockSize, l.BlockSize, cfg.MaxBlockSize)
	}
	o, total := volumeBytes(l, cfg)
	if total > uint64(cfg.MaxMemory) {
		return nil, fmt.Errorf("%w: the volume needs %d bytes, the replica has %d", blockstore.ErrOutOfRange, total, cfg.MaxMemory)
	}
	mr, err := pd.AllocMR(int(o.region), verbs.AccessAll)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	buf := BufSize(l.BlockSize)
	b := mr.Bytes()
	zero := mr.Addr() + o.zero
	for i := range l.Blocks {
		binary.NativeEndian.PutUint64(b[SlotSize*i:], zero)
		binary.NativeEndian.PutUint64(b[SlotSize*i+8:], 0)
	}
	ring, err := prism.NewReturnRing(mr, int(o.ring), cfg.ReturnSlots)
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("replica: %w", err)
	}
	pool, err := prism.NewPool(mr, prism.PoolConfig{MinSize: uint32(buf), MaxSize: uint32(buf), Stock: cfg.Stock, Offset: o.pool})
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("replica: %w", err)
	}
	v := &volume{mr: mr, pool: pool, ring: ring, cfg: cfg, cpu: cpu, stop: make(chan struct{}), done: make(chan struct{})}
	v.info = Info{Layout: l, RKey: mr.RKey(), Slots: mr.Addr(), Zero: zero, Ring: ring.Addr(),
		RingSlots: uint32(ring.Slots()), Queue: 0, BufSize: uint32(buf)}
	go v.restock()
	return v, nil
}

// maxIdle is the longest the restock loop sleeps while nothing happens.
const maxIdle = 2 * time.Millisecond

// restock keeps the free list stocked and recycles the buffers clients
// return, after quiescing the NIC (prism.Pool.Reclaim): every
// Config.Restock while clients allocate or return buffers, less and less
// often (down to every maxIdle) while nobody does.
func (v *volume) restock() {
	defer close(v.done)
	fl, _ := v.mr.(verbs.FreeLists) // NewPool checked
	every := v.cfg.Restock
	t := time.NewTimer(every)
	defer t.Stop()
	full := false
	last := -1 // the free list's length after the last pass
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
		}
		t0 := time.Now()
		idle := fl.FreeLen(v.info.Queue) == last
		n, err := v.ring.Drain(v.pool)
		if err != nil {
			slog.Warn("replica: return ring", "err", err)
		}
		// Top the free list up first, from carved memory while the
		// region has room: a Reclaim waits for the NIC to quiesce, and
		// the writes' ALLOCATEs must not find the list empty meanwhile.
		err = v.pool.Restock()
		if v.pool.Pending() > 0 {
			idle = false
			if _, e := v.pool.Reclaim(); e != nil && !errors.Is(e, prism.ErrPoolFull) {
				err = e
			}
		}
		switch {
		case errors.Is(err, prism.ErrPoolFull):
			if !full {
				slog.Debug("replica: buffer memory all carved; writes live on recycled buffers")
			}
			full = true
		case err != nil:
			slog.Warn("replica: restock", "err", err)
		}
		last = fl.FreeLen(v.info.Queue)
		if idle && n == 0 {
			every = min(2*every, max(maxIdle, v.cfg.Restock))
		} else {
			every = v.cfg.Restock
		}
		t.Reset(every)
		v.cpu.Add(int64(time.Since(t0)))
	}
}

// block returns block id's RPC store entry: its data, and its stripe's
// lock.
func (v *volume) block(id uint64) ([]byte, *sync.Mutex) {
	bs := uint64(v.info.Layout.BlockSize)
	v.made.Do(func() {
		v.tags, v.data = make([]Tag, v.info.Layout.Blocks), make([]byte, v.info.Layout.Blocks*bs)
	})
	return v.data[id*bs : (id+1)*bs], &v.locks[id%lockStripes]
}

// read is MethodRead: block id's tag and data into resp.
func (v *volume) read(id uint64, resp []byte) (int, error) {
	if err := v.info.Layout.CheckOp(id, -1); err != nil {
		return 0, err
	}
	d, mu := v.block(id)
	if len(resp) < BufHead+len(d) {
		return 0, fmt.Errorf("%w: a %d-byte response for %d-byte blocks", blockstore.ErrBlockSize, len(resp), len(d))
	}
	mu.Lock()
	binary.LittleEndian.PutUint64(resp, uint64(v.tags[id]))
	copy(resp[BufHead:], d)
	mu.Unlock()
	return BufHead + len(d), nil
}

// readTag is MethodReadTag.
func (v *volume) readTag(id uint64, resp []byte) (int, error) {
	if err := v.info.Layout.CheckOp(id, -1); err != nil {
		return 0, err
	}
	_, mu := v.block(id)
	mu.Lock()
	binary.LittleEndian.PutUint64(resp, uint64(v.tags[id]))
	mu.Unlock()
	return 8, nil
}

// write is MethodWrite: data becomes block id's value if tag is newer
// than the block's.
func (v *volume) write(id uint64, tag Tag, data, resp []byte) (int, error) {
	if err := v.info.Layout.CheckOp(id, len(data)); err != nil {
		return 0, err
	}
	d, mu := v.block(id)
	mu.Lock()
	old := v.tags[id]
	newer := tag > old
	if newer {
		v.tags[id] = tag
		copy(d, data)
	}
	mu.Unlock()
	binary.LittleEndian.PutUint64(resp, uint64(old))
	resp[8] = 0
	if newer {
		resp[8] = 1
	}
	return 9, nil
}

// close stops the restock loop and releases the region.
func (v *volume) close() error {
	var err error
	v.closed.Do(func() {
		close(v.stop)
		<-v.done
		err = v.mr.Deregister()
	})
	return err
}

// installSlot makes ⟨tag | data⟩ block id's PRISM-RS value unless the
// slot holds a tag at least as new: the CPU's own install for a
// recovering replica, whose region no client can reach yet (its
// MethodInfo fails), so no NIC operation races the stores. The first
// install of a block fills a buffer the CPU carves; a later one (an
// attempt that found a newer tag) rewrites that buffer in place: nobody
// else has ever reached it.
func (v *volume) installSlot(id uint64, tag Tag, data []byte) error {
	if err := v.info.Layout.CheckOp(id, len(data)); err != nil {
		return err
	}
	b := v.mr.Bytes()
	s := b[SlotSize*id : SlotSize*(id+1)]
	if Tag(binary.NativeEndian.Uint64(s[8:])) >= tag {
		return nil
	}
	addr := binary.NativeEndian.Uint64(s)
	if addr == v.info.Zero {
		var err error
		if addr, err = v.pool.Take(v.info.Queue); err != nil {
			return fmt.Errorf("replica: a buffer for block %d: %w", id, err)
		}
	}
	buf := b[addr-v.mr.Addr():]
	binary.LittleEndian.PutUint64(buf, uint64(tag))
	copy(buf[BufHead:BufHead+len(data)], data)
	binary.NativeEndian.PutUint64(s, addr)
	binary.NativeEndian.PutUint64(s[8:], uint64(tag))
	return nil
}

package replica

import (
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/blockstore"
)

// Tag orders a block's values: ⟨timestamp, client id⟩ as one 64-bit
// number, the timestamp in the high 32 bits and the client id in the low
// 32, so that comparing two tags as integers compares timestamps first
// and breaks ties by client id. Tag 0 is the value of a block never
// written (zeros).
type Tag uint64

// MaxTS is the largest timestamp a tag holds: a block whose timestamp
// reaches it takes no more writes (blockstore.ErrProtocol), after some
// 4·10^9 writes.
const MaxTS = 1<<32 - 1

// MakeTag is the tag of timestamp ts and client id.
func MakeTag(ts, id uint32) Tag { return Tag(uint64(ts)<<32 | uint64(id)) }

// TS is the tag's timestamp.
func (t Tag) TS() uint32 { return uint32(t >> 32) }

// ID is the tag's client id.
func (t Tag) ID() uint32 { return uint32(t) }

// String is ⟨ts, id⟩.
func (t Tag) String() string { return fmt.Sprintf("⟨%d,%#x⟩", t.TS(), t.ID()) }

// Issuer hands out one client's write tags: ABD's ⟨latest timestamp + 1,
// client id⟩, but never one tag twice for a block. Two writes of a block
// that one client runs at once read the same latest timestamp; under one
// tag two values would let reads agree on a block's tag and not on its
// value. So the issuer remembers, per stripe of blocks, the largest
// timestamp it issued, and goes above it: any timestamp above the
// majority's latest is as good for ABD. Safe for concurrent use; the zero
// value is ready.
type Issuer struct {
	issued [issuerStripes]atomic.Uint64
}

// issuerStripes is how many stripes of blocks share a counter.
const issuerStripes = 1024

// Next is the tag of client id's next write of block, whose latest tag at
// a majority is latest. It fails with blockstore.ErrProtocol once the
// block's timestamps are exhausted (MaxTS).
func (is *Issuer) Next(block uint64, latest Tag, id uint32) (Tag, error) {
	p := &is.issued[block%issuerStripes]
	ts := uint64(latest.TS()) + 1
	for {
		last := p.Load()
		if ts <= last {
			ts = last + 1
		}
		if ts > MaxTS {
			return 0, fmt.Errorf("%w: block %d's timestamps are exhausted", blockstore.ErrProtocol, block)
		}
		if p.CompareAndSwap(last, ts) {
			return MakeTag(uint32(ts), id), nil
		}
	}
}

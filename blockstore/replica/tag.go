package replica

import "fmt"

// Tag orders a block's values: ⟨timestamp, client id⟩ as one 64-bit
// number, the timestamp in the high 32 bits, so that comparing two tags
// as integers compares timestamps first and breaks ties by client id.
// Tag 0 is the value of a block never written (zeros).
type Tag uint64

// MaxTS is the largest timestamp a tag holds: a block written more often
// than that refuses further writes (blockstore.ErrProtocol).
const MaxTS = 1<<32 - 1

// MakeTag is the tag of timestamp ts and client id.
func MakeTag(ts, id uint32) Tag { return Tag(uint64(ts)<<32 | uint64(id)) }

// TS is the tag's timestamp.
func (t Tag) TS() uint32 { return uint32(t >> 32) }

// ID is the tag's client id.
func (t Tag) ID() uint32 { return uint32(t) }

// String is ⟨ts, id⟩.
func (t Tag) String() string { return fmt.Sprintf("⟨%d,%#x⟩", t.TS(), t.ID()) }

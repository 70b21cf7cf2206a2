package replica

import "fmt"

// Tag orders a block's values: ⟨timestamp, client id⟩ as one 64-bit
// number, the timestamp in the high 40 bits and the client id in the low
// 24, so that comparing two tags as integers compares timestamps first
// and breaks ties by client id. Tag 0 is the value of a block never
// written (zeros).
type Tag uint64

// Limits of a tag's fields. A block whose timestamp reaches MaxTS takes
// no more writes (blockstore.ErrProtocol): 10^12 writes.
const (
	MaxTS  = 1<<40 - 1
	MaxID  = 1<<24 - 1
	idBits = 24
)

// MakeTag is the tag of timestamp ts (at most MaxTS) and client id (at
// most MaxID).
func MakeTag(ts uint64, id uint32) Tag { return Tag(ts<<idBits | uint64(id&MaxID)) }

// TS is the tag's timestamp.
func (t Tag) TS() uint64 { return uint64(t) >> idBits }

// ID is the tag's client id.
func (t Tag) ID() uint32 { return uint32(t & MaxID) }

// String is ⟨ts, id⟩.
func (t Tag) String() string { return fmt.Sprintf("⟨%d,%#x⟩", t.TS(), t.ID()) }

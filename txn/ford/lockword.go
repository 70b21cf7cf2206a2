package ford

import "time"

// A lock word names its owner and its lease:
//
//	bit 63      1 (a locked slot's word is never 0)
//	bits 48–62  the owner's coordinator id
//	bits 0–47   the lease deadline, µs since lockEpoch (by the owner's clock)
//
// Clocks are assumed loosely synchronised: any two differ by less than
// Config.Skew. A coordinator makes its lock words strictly increasing,
// so a word names one transaction of one coordinator id: recovery
// matches it against the coordinator's log record.
type lockWord uint64

const (
	lockBit      = uint64(1) << 63
	deadlineBits = 48
	deadlineMask = uint64(1)<<deadlineBits - 1
)

// lockEpoch is the zero of lock words' deadlines: 48 bits of µs from it
// last until 2033.
var lockEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// makeLock is the lock word of coordinator id with lease deadline d.
func makeLock(id int, d time.Time) lockWord {
	us := uint64(d.Sub(lockEpoch).Microseconds()) & deadlineMask
	return lockWord(lockBit | uint64(id)<<deadlineBits | us)
}

// owner is the word's coordinator id.
func (w lockWord) owner() int { return int(uint64(w) >> deadlineBits & (maxCoordIDs - 1)) }

// deadline is the word's lease deadline.
func (w lockWord) deadline() time.Time {
	return lockEpoch.Add(time.Duration(uint64(w)&deadlineMask) * time.Microsecond)
}

// expired reports whether the word's lease has surely ended at now, by
// any clock within skew of the owner's.
func (w lockWord) expired(now time.Time, skew time.Duration) bool {
	return now.After(w.deadline().Add(skew))
}

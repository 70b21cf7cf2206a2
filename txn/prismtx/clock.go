package prismtx

import "time"

// A timestamp is ⟨clock time, client id⟩ packed into one integer, so that
// integer order is timestamp order and every enhanced CAS compares it as
// one word: the time in microseconds since epoch in the high 48 bits (good
// until 2033), the client id in the low 16. Clocks are loosely
// synchronised (every client reads its host's): a skew costs aborts, and
// delays the cleanup of a dead client's prepared timestamp by as much,
// never correctness.
const idBits = 16

// epoch is time zero of timestamps.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// stamp is the timestamp of client id at time t.
func stamp(t time.Time, id uint16) uint64 {
	return uint64(t.Sub(epoch).Microseconds())<<idBits | uint64(id)
}

// clockOf is the time part of timestamp ts, in microseconds since epoch.
func clockOf(ts uint64) uint64 { return ts >> idBits }

// idOf is the client id of timestamp ts.
func idOf(ts uint64) uint16 { return uint16(ts) }

// nextStamp is client id's timestamp for a transaction: its clock's now,
// but later than floor's time (every version the transaction read, and the
// id's previous timestamp).
func nextStamp(now time.Time, id uint16, floor uint64) uint64 {
	ts := stamp(now, id)
	if clockOf(ts) <= clockOf(floor) {
		ts = (clockOf(floor)+1)<<idBits | uint64(id)
	}
	return ts
}

// expired reports whether prepared timestamp ts is older than lease at
// time now.
func expired(ts uint64, now time.Time, lease time.Duration) bool {
	return clockOf(ts)+uint64(lease.Microseconds()) < clockOf(stamp(now, 0))
}

// Package ring is a single-producer single-consumer ring of variable-length
// messages in shared memory: the request and response channels of a shm
// transport connection, one ring per direction. The ring lives in a
// shmem.Segment (or any []byte of a MAP_SHARED mapping, or ordinary memory
// within one process); the process that creates the memory formats it with
// [Init], the peer maps the same memory and validates it with [Attach].
//
// # Layout
//
// All offsets are from the start of the memory, which must be 8-byte
// aligned (a mapping is page aligned). Each group of words written by one
// side sits on its own 128-byte block, so that the producer and the
// consumer do not invalidate each other's cache lines (128 bytes covers
// the adjacent-line prefetch of x86 and the 128-byte lines of some arm64
// parts):
//
//	offset  size  field          written by
//	     0     4  magic "ring"   Init (read-only afterwards)
//	     4     4  version        Init
//	     8     8  capacity       Init: data area size, a power of two
//	    16     8  header size    Init: HeaderSize, the data area's offset
//	   128     8  tail           producer: bytes ever committed
//	   256     8  head           consumer: bytes ever released
//	   384     4  data waiter    consumer sets 1 to park; producer clears and wakes
//	   512     4  space waiter   producer sets 1 to park; consumer clears and wakes
//	   640   cap  data area      records
//
// tail and head are free-running byte counters (never reduced modulo the
// capacity; 64 bits do not wrap in practice); the record at counter value
// x starts at data offset x mod capacity. Always 0 <= tail-head <=
// capacity, and both are multiples of 8.
//
// A record is an 8-byte header followed by its payload, padded to a
// multiple of 8 bytes, so every header and payload is 8-byte aligned:
//
//	+--------------+--------------+---------------------+---------+
//	| length (u32) |  kind (u32)  | payload (length B)  | padding |
//	+--------------+--------------+---------------------+---------+
//
// The header is one native-endian 64-bit word: length in the low half,
// kind in the high half. Kind 0 is a message. A message never wraps around
// the end of the data area: when it would, the producer first writes a
// skip record (kind 1) whose length is the number of bytes to the end of
// the data area (header included), and the message starts at offset 0.
// The skip and the message are committed together. So a message is always
// contiguous and [Ring.Peek] returns it in place, without copying. A
// message's record may take at most half the capacity ([Ring.MaxMessage]
// is capacity/2 - 8 payload bytes); that bound guarantees that an empty
// ring always has room for it, skip included, wherever the indices stand.
//
// # Memory model
//
// Indices and waiter words are accessed only with sync/atomic, on aligned
// words; Go's atomics are sequentially consistent, also between processes
// sharing a page. Payload and record headers are plain memory ordered by
// the indices:
//
//   - The producer writes a record (header and payload) with plain stores,
//     then publishes it by storing tail (release). The consumer loads tail
//     (acquire) before it reads any record below it, so it sees the whole
//     record.
//   - The consumer reads a message, then stores head past it (release).
//     The producer loads head (acquire) before it reuses those bytes, so
//     its new stores cannot overtake the consumer's reads.
//
// Each side keeps its own index privately and only publishes it; it reads
// the other side's index from shared memory. Within one process the race
// detector sees these happens-before edges, so tests on ordinary memory
// check the protocol; across processes it sees nothing.
//
// Waiting uses the classic lost-wake-up protocol on a futex word. A
// consumer that finds the ring empty sets the data waiter word to 1, then
// re-checks tail, and only then sleeps in futex wait on the word (which
// returns at once if the word is no longer 1). A producer stores tail,
// then loads the word, and if it is set, swaps it to 0 and wakes. Either
// the consumer's re-check sees the new tail, or the producer's load sees
// the flag: both sides store before they load, and sequentially
// consistent atomics forbid both loads from missing. The producer waiting
// for space mirrors this with the space waiter word and head. A side that
// is not parked costs the other side one load of a cache line that stays
// shared, per commit or release.
//
// # Trust and crash model
//
// The peer may be buggy, malicious or dead. Nothing it writes can make
// this side panic, read or write outside the memory, or hang:
//
//   - [Attach] validates the whole header and returns an error matching
//     [ErrCorrupt] or [ErrVersion] for anything inconsistent.
//   - Every value read from shared memory (the peer's index, record
//     headers) is read once, into a local, and bounds-checked before use:
//     the peer's index must stay within a capacity of this side's own, a
//     record must be a known kind, fit the published bytes and the data
//     area, and a skip must run exactly to the end. A violation makes the
//     side fail with an error matching ErrCorrupt, and keep failing: the
//     ring is then broken and the connection should be torn down.
//   - Message payload is the peer's memory: a hostile peer can change it
//     while the consumer reads it. A consumer that validates a message
//     before acting on it must copy it first.
//   - [Ring.Wait] and [Ring.WaitSpace] never sleep without limit: they park
//     in slices, notice a cancelled context at once, and, given a liveness
//     callback, call it about every millisecond while parked and return
//     [ErrPeerDead] once it reports the peer dead (after the last
//     messages it committed have been consumed: Wait prefers data).
//   - A peer killed at any instant leaves at worst an uncommitted record,
//     which is invisible; what it committed stays readable.
package ring

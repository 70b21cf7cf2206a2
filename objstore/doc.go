// Package objstore is a Plasma-style in-memory object store: a store
// keeps immutable objects in one arena of shared memory and serves
// local clients over a Unix domain socket; clients write and read the
// objects in place, without a copy. Cross-node fetch plugs in through
// Config.Fetcher (package objstore/transfer), which reads sealed objects
// through Store.Source and creates fetched ones through Store.Sink.
//
// # Objects
//
// An object is named by a 20-byte ID and holds data and metadata. One
// client creates it unsealed (Create returns a writable slice of the
// shared memory, the metadata already copied in), then seals it (Seal:
// immutable and visible to everyone from then on) or aborts it (Abort).
// Get blocks until objects are sealed or a timeout passes and returns
// read-only views of them. References are counted per object and per
// client: Create holds the creator's reference, each Get entry one more
// (two Gets of one object hold two), Release drops one. Delete removes
// an object nobody references (ErrInUse otherwise). When an allocation
// does not fit, the store evicts sealed objects nobody references or
// pins, least recently released first; ErrStoreFull says that even
// evicting all of them would not make room (then nothing is evicted).
//
// Get of an object that is missing — never created, deleted, evicted,
// or not sealed before the timeout — gives a nil entry, not an error
// (Plasma's semantics); Contains and Release say ErrNotFound. A timeout
// of zero does not wait; below zero waits until ctx ends.
//
// # Memory layout
//
// The arena is one memfd of Config.Mem bytes mapped MAP_SHARED by the
// store; its pages cost memory only once touched. A best-fit free list
// (sorted by offset, coalescing on release) hands out runs aligned to
// Alignment (64 bytes); an object's run holds its data at offset off and
// its metadata right after, at off+dataSize (as in Plasma). Freed memory
// stays resident for the next objects (which then take no page faults)
// until the bytes freed since the last give-back pass
// Config.KeepResident; then every free run with at least 64 KiB of whole
// pages is punched out of the memfd (fallocate PUNCH_HOLE), so the
// store's resident memory (Stats.ResidentBytes, from mincore) stays
// within its objects plus KeepResident. A client maps the arena twice, once read-write for the
// buffers Create returns and once read-only for the views Get returns,
// so writing to a sealed object faults instead of corrupting it.
//
// # Protocol
//
// A client connects to Config.Socket (a path, or "@name" in the abstract
// namespace). The store's first frame, hello, carries the arena's file
// descriptor (SCM_RIGHTS), its size and the object size limit; the
// client maps the arena and closes the descriptor. Every later frame is
//
//	type u8 | reqID u32 | len u32 | payload
//
// little-endian. The requests and their replies (type | 0x80, same
// reqID, payload starting with a status byte):
//
//	Create   id, dataSize, metadata   → offset
//	Seal     id                       → status
//	Abort    id                       → status
//	Get      timeout, ids             → per id: present, offset, dataSize, metaSize
//	Release  id                       → status
//	Delete   ids                      → a status per id
//	Contains id                       → present
//	List                              → per object: id, sizes, sealed, refs, created
//	Subscribe                         → status, then Notify(id) frames with its reqID
//	Fetch    ids                      → a status per id
//	Cancel   (reqID of a blocked Get, a Fetch or a subscription; no reply)
//
// Each call is one round trip (Get and Release of any size included:
// the reply carries an offset, not bytes). Requests are pipelined: a
// client's goroutines share one socket, and one reader goroutine matches
// replies to callers by reqID. Both sides check every length before
// allocating and bound frames (a request: MaxMetadataSize plus a little;
// a reply: a List of MaxListObjects).
//
// # Faults
//
// A client that goes away — Close, a crash, kill -9: its socket closes
// — is cleaned up by the store: its unsealed objects are aborted, its
// references dropped, its blocked Gets, subscriptions and fetches
// ended. A client whose context ends during a call gets the context's
// error; a blocked Get or a Fetch is cancelled at the store (no waiter
// is left), and what a late reply grants (a Get's references, a
// Create's object) is given back. Other calls (Seal, Release, Delete …)
// were sent before the context ended and may still take effect at the
// store, as with any request already on its way: a caller that must know
// asks again (Contains, List) or cleans up as objstore/arrowobj's Put
// does. When the store stops or dies, every pending and later call fails
// with ErrDisconnected; Connect again to
// the restarted store (which removes a dead store's socket file). A
// store answers at most Config.MaxOutstanding of a client's requests at
// once (half of them blocked Gets, beyond which Get fails with ErrBusy);
// past that it stops reading the client's socket, so a client flooding
// requests without reading replies holds a bounded amount of the
// store's memory. A malformed frame closes that client's connection only.
// A subscription whose reader falls SubscriptionBuffer IDs behind is
// dropped (ErrLagged), never waited for: sealing never blocks.
//
// # Transfer layer
//
// Source.Pin holds a sealed object (neither evicted nor deleted) and
// returns its bytes for a holder to send. Sink.Create makes an unsealed
// object owned by the store itself; commit seals it with no reference
// held (so it is evictable), abort frees it. Until commit nothing of it
// is visible to Get, Contains, Subscribe or (as sealed) List. The store
// serves Client.Fetch by calling Config.Fetcher.Fetch with its Sink.
//
// # Files
//
//	store.go      Store, Config: lifecycle, Stats
//	arena.go      the memfd arena: map, punch holes, resident bytes
//	alloc.go      the best-fit, coalescing allocator
//	table.go      the object table's entries
//	lru.go        the eviction order
//	objects.go    the store's operations on its table
//	wait.go       blocked Gets
//	server.go     accepting clients, reading and serving their requests
//	session.go    one client at the store: its state and output queue
//	status.go     errors on the wire
//	wire.go       frames and their encoders and decoders
//	client.go     Client: connecting, the reader, calls and cancellation
//	calls.go      the Client's calls
//	subscribe.go  subscriptions, both sides
//	source.go     Source and Sink
//	stats.go      Stats
package objstore

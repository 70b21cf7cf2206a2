// Package sherman is Sherman's B+link tree on disaggregated memory
// (Wang, Lu, Shu, SIGMOD'22): an ordered index (btree.Tree) whose every
// operation is one-sided — READs, WRITEs, masked CASes and
// FETCH_AND_ADDs on plain memory node regions (package memnode); no CPU
// of a memory node takes part.
//
// # Memory
//
// The tree lives in one region of each of one or more memory nodes
// (Conn). Zeroed regions are an empty tree: node 0 of memory node 0 is
// the first root, an empty leaf. Each region:
//
//	0        layout word    (KeySize, ValueSize, LeafSlots, InnerSlots; the first client CASes it in)
//	8        root pointer   (memory node 0 only; 0 = node 0)
//	16       chunk counter  (clients FETCH_AND_ADD it to take 16 nodes at a time)
//	64       lock words     (one per node: the global lock)
//	L        nodes          (fixed size, node i at L + i·size)
//
// A pointer is (memory node << 32 | index+1); 0 is nil. Every node has
// the same size:
//
//	+---------+-----------------------------------+---------+----------+-------------------------+---------+
//	| version | level·flags·count·crc             | sibling | leftmost | low fence · high fence  | ...     |
//	| front   | (crc: header; whole node if inner)|         | (inner)  | (len + key each)        |         |
//	+---------+-----------------------------------+---------+----------+-------------------------+---------+
//	... entries ... | version back |
//
//	leaf entry:     | ver | crc | klen vlen key value | ver | node tag |   (unsorted; klen 0 = free)
//	internal entry: | klen key | child |                                  (sorted; child of keys ≥ key)
//
// Fences bound the keys a node may hold, [low, high) (absent = −∞, +∞);
// the sibling is the node to the right at the same level (B-link).
// Nodes split and never merge: a Delete frees its leaf slot and leaves
// the leaf under-full, and nodes are never given back.
//
// # Two-level versions: what a reader does
//
// A whole-node write (a split rewrites both halves; an internal insert
// rewrites the node) bumps the node version, written at both ends.
// A leaf update writes back only its entry, whose version is at both of
// its ends and whose node tag is the node version it was written under.
// A reader READs the whole node and takes it only if the two node
// versions agree, the header checksum holds, and every entry's versions
// agree, its checksum holds and its tag is the node's version; else the
// node is torn (a writer is mid-way) and it READs again (yielding, then
// sleeping, between tries). The checksums and tags are there because a
// software NIC's WRITE is a memory copy whose order a concurrent READ
// cannot rely on: a READ that overtakes a split's rewrite can see old
// versions at both ends and new entries between them, and the tags of
// those entries give it away.
//
// A node that is whole but does not cover the key was split since the
// reader chose it (its cache is stale, or a split is under way): when
// the key is at or above the high fence, the reader follows the
// sibling pointer; the copies of internal nodes it came through are
// dropped from its cache (and the root re-read when the root split).
//
// # Index cache
//
// A client caches the internal nodes it reads and goes down to the leaf
// from the cache: a Get is one READ of the leaf when the cache is warm.
// A cached copy is never wrong in a harmful way — nodes never move or
// merge, so a stale copy only sends the client to a node left of the
// right one, and B-link sibling pointers lead it on.
//
// # Lock hierarchy
//
// Writers lock a node in two levels (lock.go):
//
//  1. the local lock table of the client process: one entry per node
//     that a task of the process wants; tasks queue on it, so at most
//     one task of a process competes for a node's global lock (the
//     table belongs to the Client: a process's tasks share one Client
//     to share it);
//  2. the global lock: the node's word in the lock area, taken by masked
//     CAS from 0 to the holder's lease word (client id · epoch).
//
// A task done with a node whose local queue is not empty hands the
// global lock to the next task of its process with no round trip, at
// most 8 times in a row, then releases it for the other processes.
//
// Command combination: the write-back (one entry, or whole nodes) and
// the unlock go in one post list on the node's QP — a masked CAS guard
// that finds the lease word still the holder's, the WRITEs
// (CONDITIONAL on the guard), the CAS that frees the lock — so a write
// costs one round trip beyond the lock and the read.
//
// A client that dies holding a lock: a lock word that stays the same
// for a whole lease (Config.Lease, 1 s) is taken over by CAS from that
// word. A holder that was merely slow learns it from its guard (its
// writes did not happen) and runs its operation again. What a lease
// cannot cover is a list stopped at the node between its guard and its
// writes for longer than a lease.
//
// # Splits
//
// A full leaf splits under its lock: the upper half of its entries go
// to a new node (low fence = the separator, the old high fence and
// sibling), written first; then the old leaf is rewritten with the
// lower half, its high fence lowered to the separator and its sibling
// pointing to the new node, and unlocked in the same list. From that
// moment every key is reachable (B-link). The separator then goes into
// the parent (found fresh from the root, moving right past high fences,
// locked, rewritten; idempotent), which splits in turn when full; when
// the root's level splits, a new root is built over the root and its
// siblings and installed by CAS of the root word (a client that loses
// the CAS inserts into the winner's root). A client that dies between
// the two steps leaves a half-done split: harmless — readers and
// writers reach the new node through the sibling pointer, and later
// splits and root growths take it in.
//
// # Round trips
//
// Get: 1 READ (warm cache; plus one READ per cache miss or sibling hop);
// with speculative lookup (Smart-BT) a warm Get's one READ is of one
// leaf entry, and a stale position adds the leaf's READ.
// Put and Delete: lock CAS, READ, write-back+unlock = 3 (2 when the
// global lock was handed over). Scan: one list of READs per run of
// leaves — the leaf at the cursor and those right of it that the
// cached level-1 node names (up to 16, as many as the limit calls
// for), so a warm 100-key scan is one or two round trips; a leaf split
// since the level-1 copy was cached ends the run there (scan.go). A leaf split
// adds a FETCH_AND_ADD per 16 nodes and the parent's lock, READ and
// write-back.
//
// # The seam for Smart-BT
//
// The tree builds its post lists against a slot's registered buffer and
// hands them to an issuer (issuer.go): acquire a slot, do(list on memory
// node mn), back off after a failed lock CAS, release. Sherman's issuer
// posts on one QP per memory node and a poller goroutine per CQ wakes
// the waiting task; Smart-BT's issuer (smartissuer.go) runs each
// operation as a task of a smart.Runtime. The tree's protocol does not
// change.
//
// # Smart-BT
//
// Config.Smart selects the design:
//
//	Config.Smart = nil                                      Sherman (the default)
//	Config.Smart = &SmartConfig{}                           Sherman+: Smart's runtime, no technique
//	Config.Smart = &SmartConfig{Techniques: AllTechniques}  Smart-BT
//	Config.Smart = &SmartConfig{Techniques: SpecLookup}     one technique alone (ablation)
//
// On Smart's runtime (Sherman+ and Smart-BT) the client has Workers
// workers (default GOMAXPROCS), each with its own CQ, its own QP to
// every memory node and its credits, and Tasks slots per worker
// (default 8; Config.Slots is not used). An operation takes a slot,
// enters a task of the slot's worker (smart.Worker.Enter), runs its
// lists as that task's Do on the worker's QPs, and leaves (Task.Leave),
// reporting its failed lock attempts (Task.Finished). The local lock
// table is the client's as before: tasks of every worker queue on it
// and hand global locks over to each other.
//
// Techniques is a bitmask; each technique switches on alone for an
// ablation:
//
//   - Throttling: a worker's outstanding work requests are bounded by
//     credits, the bound tuned by Smart's epoch tuner (Algorithm 1:
//     SmartConfig.Tuner) or fixed by SmartConfig.Limit.
//   - Backoff: a lock CAS that finds the lock held waits a truncated
//     exponential backoff (smart.Task.Backoff) whose maximum follows
//     the retry rate (C0, BackoffLimit), instead of Sherman's
//     yield-then-sleep.
//   - CoroutineThrottle: the operations a worker runs at once (n_max,
//     at most Tasks) shrink while the retry rate is high.
//   - SpecLookup: speculative lookup (spec.go). The client caches key
//     → (leaf, entry slot, leaf node version) from the leaves its Gets
//     read; a Get whose key is cached READs that one entry (a leaf
//     entry's bytes, not the node's: one small READ, one round trip)
//     and takes its value when the entry is whole (versions and
//     checksum), holds the key and carries the cached node version as
//     its tag. Else — deleted, slot reused, torn, leaf split — it reads
//     the leaf as Sherman does and refreshes the cache (SpecEntries
//     bounds it). A stale position costs one extra round trip, never a
//     wrong value.
//
// Dial fills SmartConfig.Device and Connect (one more connection per
// worker and memory node); with Open the caller gives them (only each
// Conn's Region is then used). Stats counts round trips, bytes read
// and speculative hits and misses; SmartStats shows each worker's
// limit, credits, backoff maximum, retry rate and n_max.
//
// Files: layout.go (layout, header, pointers), node.go (node codec),
// issuer.go (the seam, Sherman's QP issuer), client.go (Client, Open),
// dial.go (Dial: device, connections and client in one call),
// cache.go (index cache), read.go (traversal, Get), write.go (Put,
// Delete), split.go (splits, parent inserts, root growth), alloc.go
// (node allocator), lock.go (lock hierarchy, leases), scan.go (Scan: runs of leaves),
// smartbt.go (SmartConfig, techniques), smartissuer.go (the issuer on
// smart), spec.go (speculative lookup).
package sherman

// Package race is RACE hashing, and with two options Smart-HT: key-value
// stores whose every table operation is a client's one-sided READ, WRITE,
// CAS or FETCH_AND_ADD on one memory node. The node's CPU only hands out
// memory.
//
// RACE is from "One-sided RDMA-Conscious Extendible Hashing for
// Disaggregated Memory" (Zuo et al., USENIX ATC'21). Smart-HT is the hash
// table of "Scaling Up Memory Disaggregated Applications with SMART" (Ren
// et al., ASPLOS'24): RACE plus a speculative slot cache, a conflict
// backoff and Smart's worker runtime. Both designs share one node and one
// layout. A Client is RACE with a zero ClientConfig. Set
// ClientConfig.Cache (a SlotCache), .Backoff and .Runtime and it is
// Smart-HT. kv/stores builds both by name ("race", "smart-ht").
//
// # Memory layout
//
// The node lays everything out in one region (Server, layout.go). Offsets
// are from the region's start. The 8-byte words are in native byte order
// (the node and its clients share it). Block headers are little-endian.
//
//	[0:8)           global depth (1 to MaxDepth = 16)
//	[8:16)          directory lock: 0 free, else the holder's lease word (id, epoch)
//	[64:524352)     directory: 1<<16 entries of 8 bytes (the first 1<<depth are used)
//	[524352: …)     subtables and client block chunks, bump-allocated by RPC, 64-byte aligned
//
//	directory entry  63        54 53    48 47                        0
//	                ┌────────────┬────────┬───────────────────────────┐
//	                │ version 10 │ depth 6│ subtable address 48       │
//	                └────────────┴────────┴───────────────────────────┘
//
//	subtable (12,352 bytes)
//	┌─────────────┬───────────────────────────────────────┬─────┬──────────┐
//	│ control 64 B│ group 0: main 0 │ overflow │ main 1   │ ... │ group 63 │
//	└─────────────┴───────────────────────────────────────┴─────┴──────────┘
//	                each bucket 64 B = 8 slots of 8 B; a group is 192 B
//
//	control word (the first 8 of the 64 control bytes): bits 0–31 writers inside,
//	              32–37 local depth,
//	              bit 38 split lock, 40–63 suffix (the directory index bits
//	              all the subtable's keys share)
//	lease word (the next 8): the split lock holder's id and epoch
//
//	slot          63     56 55       48 47                        0
//	             ┌─────────┬───────────┬───────────────────────────┐
//	             │ fp 8    │ units 8   │ block address 48          │   0 = empty
//	             └─────────┴───────────┴───────────────────────────┘
//	             units: the block's length in 64-byte units (255: at least
//	             that; the block's header has the rest)
//
//	block (written once, before its slot; never modified), 8 + klen + vlen + 8 bytes
//	┌──────────┬───────┬──────────┬─────┬───────┬────────────────────────────────┐
//	│ klen u16 │ 0 u16 │ vlen u32 │ key │ value │ CRC64 (ECMA) of all before, u64│
//	└──────────┴───────┴──────────┴─────┴───────┴────────────────────────────────┘
//
// A key's hash h (kv.Hash) picks its subtable: directory entry
// h & (1<<global depth − 1). Two hashes pick two candidate groups, and a
// bit of each picks a half. A half is a "combined bucket": main 0 and
// the overflow bucket, or the overflow bucket and main 1. That is 128
// contiguous bytes at offset 64 + 192·group + 64·half, read by one READ.
// A key lives in one of the (up to) 32 distinct slots of its two combined
// buckets. The slot's fingerprint (the top byte of h) avoids most block
// reads of other keys.
//
// # Round trips
//
// Each list of one-sided requests is one round trip. Client.RoundTrips
// counts them with the RPCs. RACE (no cache):
//
//   - GET hit: 2. READ both combined buckets (one list), then READ the
//     block of each slot whose fingerprint matches and check its CRC and
//     key (one more per fingerprint collision).
//   - GET miss: 2. READ the buckets; a miss then re-reads the global
//     depth and the cached directory entry (one list). If either changed, a
//     split moved keys: the client re-reads the directory (2 round trips)
//     and looks again.
//   - PUT of an existing key: 4. Enter: FETCH_AND_ADD 1 on the control
//     word with the two bucket READs (one list). READ the block whose
//     fingerprint matches, to check the key. WRITE the new block and CAS
//     the slot (one list). Leave: FETCH_AND_ADD −1.
//   - PUT of a new key (insert): 3. Enter and read, WRITE and CAS into an
//     empty slot plus the two bucket READs again (one list), leave. The
//     second read catches a concurrent insert of the same key. The copy at
//     the lower slot address wins, and the other one is CASed back to 0 (a
//     block READ and a CAS more, only then).
//   - DELETE: as a PUT of an existing key (the CAS writes 0), so 4. A
//     DELETE of a missing key is 2: enter and leave.
//   - Block memory: one RPC per 1 MiB chunk a client takes from the node.
//   - Four full buckets: the writer splits the subtable (below). That
//     costs about 15 round trips and an RPC, plus one READ per key in the
//     subtable. Then it tries again.
//
// Smart-HT (SlotCache set; the cache maps a key to ⟨slot address, slot
// word, subtable⟩):
//
//   - GET of a cached key: 1. One list READs the slot and the cached
//     block. If the slot still holds the cached word, the block is current.
//     If the slot moved on to a new word with the key's fingerprint, one
//     more READ of that block follows (2). Otherwise it falls back to
//     RACE's GET.
//   - PUT of a cached key: 1. One list: FETCH_AND_ADD 1 (enter), WRITE the
//     block, a masked CAS that swaps nothing and tests that the split lock
//     is clear, then CONDITIONAL on that test the CAS of the cached slot,
//     and FETCH_AND_ADD −1 (leave). A split that locks after the test
//     waits for this writer to leave, so the CAS never lands in a subtable
//     being copied. A lost CAS returns the slot's current word. If that
//     word has the key's fingerprint, the PUT backs off, READs its block,
//     and if the block still holds this key it installs over that word:
//     2 round trips per loss, up to 4 tries. Otherwise it takes RACE's
//     path.
//   - Uncached keys, and every DELETE, take RACE's path and fill (or drop)
//     the cache entry.
//
// What a client caches: the global depth and the directory (re-read when
// a miss finds them stale, when a writer finds a subtable locked or
// stale, and after its own split); a 1 MiB chunk of block memory and free
// lists of its own freed blocks; with Smart-HT, the SlotCache. The cache
// is bounded (NewSlotCache) and is emptied whole when full. Share one
// cache among the clients of a process.
//
// # The node's CPU
//
// It answers three RPCs (Server). One is the region's address and rkey,
// at connect. One is "alloc n bytes", for 1 MiB block chunks and for new
// subtables. The last is "free these ranges": a closing client gives back
// the rest of its chunk and its free blocks. The node holds them back for
// 200 ms (a GET may still read a block freed just before), then reuses
// them, merged with their neighbours (pool.go). Server.CPU is the time
// spent in the last two. Nothing else runs there: lookups, inserts,
// updates, deletes and splits are all the clients' one-sided operations.
//
// # Resizing
//
// Splits run while other clients go on (split.go). The splitter locks the
// subtable (CAS the lock bit, and its lease word beside it) and waits for
// its writers to leave (one lease at most). It
// copies the keys whose next hash bit is 1 into a new subtable, at the
// same positions. Under the directory lock it doubles the directory if
// needed, and it repoints and versions the entries. Then it clears the
// moved slots from the old subtable and unlocks it with the new depth,
// then unlocks the new subtable (created locked, so that no writer
// changes a moved key while its old copy is still there).
// Readers never wait. Writers that find the lock leave, back off and
// refresh their directory.
//
// # Failures
//
//   - Torn or stale reads. Slots, control words and directory entries are
//     8-byte words, written by CAS, FETCH_AND_ADD or whole WRITEs, so a READ
//     never sees one half-written. A block is written before its slot
//     points to it and is never changed while reachable. A freed block
//     waits 100 ms before reuse, so a GET that read the old slot still
//     finds it. If the block was reused anyway, its CRC64 or key check
//     fails and the GET reads again (it gives up with kv.ErrUnreachable
//     after 1000 tries).
//   - Stale directory. The 10-bit version in every directory entry
//     changes at each split. That lets a miss tell "not there" from
//     "moved", and a writer checks the control word's depth and suffix
//     when it enters.
//   - Contention. Lost CASes retry. RACE backs off (truncated
//     exponential, 20 µs up to 2 ms) after 8 attempts. Smart-HT backs off
//     after every loss, as smart.Backoff says. A write that keeps losing
//     for 1000 attempts and 30 s fails with kv.ErrUnreachable.
//   - A full table. A subtable whose four buckets are full is split. A
//     subtable already at depth 16 cannot split: kv.ErrFull. So does a node
//     whose memory (Config.Memory) is used up. A client that closes gives
//     its unused memory back; one that dies without closing keeps it from
//     the node (up to its 1 MiB chunk and its free blocks). A freed block
//     of 255 units (16,320 bytes) or more is not reused.
//   - A failed connection. A completion error fails the client's
//     connection: kv.ErrUnreachable for every operation.
//   - A cancelled operation. Until it registers as a writer, an
//     operation honours its caller's context. From the entering
//     FETCH_AND_ADD to the leaving one, and for a whole split, its
//     requests run under the client's own context (ended by Close): it
//     leaves the subtable, or finishes the split, before it returns the
//     caller's error. A request list whose caller gave up keeps its slot
//     (buffer) until its completion arrives, and the Poster hands the
//     slot back then, once.
//   - A client that dies holding something in the table. Nothing on the
//     node watches clients: the others recover, with leases
//     (ClientConfig.Lease, 1 s by default), each on its own clock. A split
//     lock carries a lease word (the holder's id and an epoch, at byte 8
//     of the subtable's control bytes) that the splitter renews every
//     quarter lease; the directory lock is such a word. A client that
//     sees the same word on a lock for a whole lease takes it over by CAS
//     and finishes the split (when the directory already points at both
//     halves) or unlocks the subtable at its depth. Every change a
//     splitter makes is CONDITIONAL on its lease word still being there,
//     so a slow splitter that was taken over changes nothing more. A dead
//     writer's count stays in the control word: a split waits one lease
//     for the writers inside, then goes on, and every writer's slot CAS
//     is CONDITIONAL on the control word still showing the lock clear and
//     the depth it entered on. Not covered: a request list that stops at
//     the node between such a guard and the request after it for more
//     than a lease (lease.go).
//   - A node restart loses the table: it lives only in the node's memory
//     (docs/kv.md, Durability).
//
// # Usage
//
// A node lays out its region and serves each client connection:
//
//	srv, err := race.NewServer(nodePD, race.Config{Depth: 4, Memory: 64 << 20})
//	...
//	go srv.Serve(ctx, nodeQP, nodeCQ)
//
// A client on an RC QP connected to it (stores.ConnectClient):
//
//	cfg := race.ClientConfig{} // RACE
//	if smartHT {
//		cfg.Cache = race.NewSlotCache(0) // share one per process
//		cfg.Backoff = &smart.BackoffConfig{Dynamic: true}
//		cfg.Runtime = rt // optional: stores.NewRuntime, on the client's device and PD
//	}
//	c, err := race.NewClient(ctx, pd, qp, cq, cfg)
//	...
//	err = c.Put(ctx, []byte("hello"), []byte("world"))
//	v, err := c.Get(ctx, []byte("hello"), nil)
//	err = c.Delete(ctx, []byte("hello"))
//
// The runnable Example in kv/stores does the same through stores.NewServer
// and stores.NewClient, which size the node and set Smart-HT's options.
//
// # Files
//
// layout.go (region, words, blocks), server.go (the node), client.go (the
// type and GET / PUT / DELETE entry points), dir.go (directory cache),
// read.go (buckets, blocks, GET), write.go (PUT and DELETE by step),
// split.go (resizing by step), lease.go (what clients hold, and taking
// it over from dead ones), alloc.go (block memory), cache.go
// (SlotCache), speculate.go (Smart-HT's speculative GET and PUT).
package race

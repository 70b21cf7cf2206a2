// Package prismkv is PRISM-KV: a key-value store built on PRISM's NIC
// primitives. A GET is one bounded indirect READ. A PUT or DELETE is one
// ALLOCATE → WRITE → CONDITIONAL CAS chain. The memory node's NIC runs
// both, and the node's CPU only restocks its free lists.
//
// The design is the key-value store of "PRISM: Rethinking the RDMA
// Interface for Distributed Systems" (Burke et al., SOSP'21). It uses the
// four primitives that rdmakit's soft NIC implements (package prism,
// verbs): indirection through bounded pointers, NIC-side allocation from
// posted free lists, the enhanced (16-byte, masked, indirect-operand)
// CAS, and chaining (CONDITIONAL, output redirection into the QP's
// scratch area).
//
// # Memory layout
//
// One region, so that an indirect operation can follow a slot to its
// item under one rkey (Server, layout.go):
//
//	[0 : 16·Slots)              slots: ⟨item address u64, item length u64⟩, native byte order
//	emptyOff = 16·Slots↑64      the empty item (8 bytes) unused slots point to; at +32 the
//	                            free item slots of deleted keys point to
//	emptyOff + 64               the farthest distance word
//	emptyOff + 128              lock words, one per segment of 64 slots
//	ringOff  = locks' end↑64    the return ring: 64 + 8·ReturnSlots bytes (prism.ReturnRing)
//	poolOff  = ring's end↑128 KiB   item buffers, Memory bytes, posted to the NIC's free lists
//	                            (prism.Pool: one list per power of two from 64 B to 128 KiB)
//	(x↑n: x rounded up to a multiple of n)
//
//	slot (16 bytes, a bounded pointer; CASed whole)
//	┌──────────────────────┬──────────────────────┐
//	│ item address u64     │ item length u64      │   unused: ⟨empty item, 8⟩, freed: ⟨free item, 8⟩
//	└──────────────────────┴──────────────────────┘
//
//	item (little-endian; never modified while a slot points to it)
//	┌──────────┬──────────┬──────┬──────────┬─────┬───────┐
//	│ klen u16 │ flags u8 │ 0 u8 │ vlen u32 │ key │ value │   flags: bit 1 empty, bit 2 free
//	└──────────┴──────────┴──────┴──────────┴─────┴───────┘
//
// A key's home slot is Hash(key) mod Slots. Collisions probe the next
// slots (linear probing): a probe sequence passes slots of other keys and
// free slots, and ends at the first empty slot or past the farthest any
// key was ever put from its home slot (a word in the node, read with the
// second probe, raised by an insert before its CAS). A
// DELETE frees its key's slot: the slot then points to the free item,
// which probes pass and a new key may take. A slot never becomes empty
// again, so a key stays reachable from its home slot. Defaults (Config):
// 65,536 slots, 128 MiB of items, 1 MiB of posted buffers per class, a
// restock every 200 µs, a 4,096-slot return ring.
//
// # Inserting a key without a slot
//
// Two clients inserting the same new key at once must not both take a
// slot. So an insert holds the lock of its key's home segment (64 slots)
// from the lookup that finds no slot to the CAS that takes one (the
// first free or empty slot of the sequence); every inserter of a key takes
// the same lock. The lock is a word in the node: a CAS from 0 to the
// client's token, tried in the lookup's first list, released in the
// install list. A holder that dies keeps it; a waiter that sees one token
// for a second takes it over, and the holder's CAS is conditional on its
// token still being there. Updates and deletes take no lock.
//
// # Reused slots
//
// A client may hold a slot's old value (its slot cache, a lookup) while
// the key is deleted, its item recycled and the slot taken by another key
// — possibly with a buffer at the same address and of the same length.
// So every install checks, in its list before its CAS, that the slot
// still points to an item of this key: an indirect 32-byte masked CAS that
// swaps nothing compares the item's key length and first 24 key bytes,
// and the CAS is conditional on it. A GET compares the whole key of the
// item it reads. A check that fails sends the operation back to the
// lookup.
//
// # Round trips
//
//   - GET: 1 when the key is in its home slot or in its cached slot. One
//     bounded indirect READ through the slot returns the item, and only
//     the item's bytes. Each further slot probed costs 1 more (a free
//     slot known from a bulk read costs nothing). A miss is 1 when the
//     home slot is unused.
//   - PUT, warm (the slot cache knows the key's slot and the slot's value):
//     1. One list: ALLOCATE a buffer of the item's size class and write the
//     item into it, its address redirected into the QP's scratch area.
//     WRITE the item's length next to it (inline). A 16-byte masked CAS,
//     CONDITIONAL and INDIRECT_ARG, installs ⟨address, length⟩ from the
//     scratch area if the slot still holds the old pair. A READ of the
//     scratch area returns the address.
//   - PUT, cold: 2. A lookup that reads each probed slot's value along
//     with its item (1 per slot probed), then the chain.
//   - A lost CAS returns the slot's current pair. When the slot holds
//     another version of this key, the chain runs again against it (1
//     more). When the slot is or was unused (a wrong guess), the key is
//     looked up again.
//   - PUT of a key without a slot: 2 when its home segment's lock is
//     free: the lookup (the lock taken in its first list), then the chain
//     (the lock released in it). A held lock costs a wait and the lookup
//     again.
//   - DELETE: one list: key check, CAS to the free item. A DELETE of a
//     key that has no slot is the lookup alone (1).
//   - A probe past the home slot also reads the next 64 slots' values in
//     bulk: free slots among them are passed without a round trip.
//   - Returning replaced items: batched in the background, ReturnBatch
//     (32) at a time or every 10 ms. Per batch, one FETCH_AND_ADD reserves
//     ring slots and one CAS per buffer fills them. These lists count in
//     Client.RoundTrips.
//
// What a client caches: per key, its slot and the slot's value as last
// seen (ClientConfig.CacheKeys buckets, direct-mapped; default 65,536).
// A PUT caches its key. A GET caches only a key it found away from its
// home slot (without the slot's value: the next PUT's CAS reveals it). A
// stale entry costs one failed probe or CAS and is then dropped.
//
// # The node's CPU
//
// Every Config.Restock (200 µs) it drains the return ring into the pool.
// It recycles returned buffers only after quiescing the NIC
// (verbs.FreeLists.Quiesce), so no READ still in flight sees a buffer's
// next life. When nothing waits to be recycled, it tops each free list up
// to Config.Stock bytes. Server.CPU is the time spent there. An RPC
// handler answers the layout at connect. Every GET, PUT and DELETE is
// executed by the node's NIC.
//
// # Failures
//
//   - Torn reads cannot happen, so there are no CRCs. An item is written
//     (by ALLOCATE) before its slot points to it and never changes while
//     reachable. A slot changes by one 16-byte CAS. A buffer is recycled
//     only after every NIC operation that may still read it has finished.
//     An item that does not decode is read 3 more times, then the GET or
//     PUT fails with kv.ErrUnreachable.
//   - Contention. CASes that lose retry against the current pair. After
//     65,536 lost races in a row the PUT fails with kv.ErrUnreachable.
//   - An empty free list. The ALLOCATE is refused like a receiver-not-ready
//     and retried 6 times, 5 ms apart (stores.ConnectClient), so it waits
//     for the node's next restock. When item memory is exhausted the only
//     refill is recycling, and the client's returns queue behind the
//     waiting ALLOCATE on the same QP. So after about 30 ms the PUT fails
//     with kv.ErrUnreachable, and the connection with it (docs/kv.md).
//   - A full index. When no slot is free or empty, an insert fails with
//     kv.ErrFull.
//   - A dead writer. A client that dies mid-chain may leave an allocated
//     buffer that no slot points to, and the items it had not yet
//     returned are never recycled. One that dies holding a segment lock
//     delays the inserts of that segment's new keys by a second (the
//     lease). One that dies between reserving return ring slots and
//     filling them leaves holes the node passes after a second
//     (prism.HoleGrace). Nothing else waits for it (TestKilledWriters).
//   - A failed connection: kv.ErrUnreachable. A node restart loses the
//     data (docs/kv.md, Durability).
//
// # Usage
//
// The runnable Example in kv/stores runs a PRISM-KV node and a client on
// a loop fabric, devices and connection included. In short:
//
//	srv, err := prismkv.NewServer(nodePD, prismkv.Config{Slots: 1 << 18, Memory: 64 << 20})
//	...
//	go srv.Serve(ctx, nodeQP, nodeCQ)
//
//	// qp connected with stores.ConnectClient, for the ALLOCATE's RNR pacing
//	c, err := prismkv.NewClient(ctx, pd, qp, cq, prismkv.ClientConfig{})
//	...
//	err = c.Put(ctx, []byte("hello"), []byte("world"))
//	v, err := c.Get(ctx, []byte("hello"), nil)
//	err = c.Delete(ctx, []byte("hello"))
//
// # Files
//
// layout.go (slots and items), server.go (the node: layout and restock
// loop), client.go (the client, returns), find.go (probing, GET),
// install.go (PUT, DELETE, inserting a new key), chain.go (the install
// list and its key check), lock.go (segment locks), slotcache.go (the
// client's slot cache).
package prismkv

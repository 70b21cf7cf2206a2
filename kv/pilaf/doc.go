// Package pilaf is a Pilaf key-value store. GETs are clients' one-sided
// READs, checked by CRC64s. PUTs and DELETEs are RPCs that the memory
// node's CPU executes.
//
// The design is from "Using One-Sided RDMA Reads to Build a Fast,
// CPU-Efficient Key-Value Store" (Mitchell, Geng, Li; USENIX ATC'13).
// Its idea is self-verifying data structures. Readers never coordinate
// with the one writer (the node's CPU). Instead, every index entry
// carries a CRC of itself and a CRC of the extent it points to, so a
// reader detects a READ that raced a write and reads again. The paper's
// index is a cuckoo hash table. This one uses linear probing.
//
// # Memory layout
//
// One region (Server, layout.go). Clients may only READ it: its MR grants
// remote read and nothing else.
//
//	[0 : 32·Buckets)          index: Buckets entries of 32 bytes
//	[32·Buckets↑64 : …)       extents, Memory bytes (x↑64: x rounded up to a multiple of 64)
//
//	index entry (32 bytes, little-endian; all zero = empty)
//	┌───────────────┬────────────┬────────────┬──────────────────┬──────────────────┐
//	│ extent address│ extent len │ meta       │ CRC64 of extent  │ CRC64 of [0:24)  │
//	│ [0:8)         │ [8:12)     │ [12:16)    │ [16:24)          │ [24:32)          │
//	└───────────────┴────────────┴────────────┴──────────────────┴──────────────────┘
//	meta: bit 31 valid, bit 30 tombstone, bits 0–23 key fingerprint (bits 40–63 of the hash)
//
//	extent (in a power-of-two buffer of at least 64 bytes)
//	┌──────────┬───────┬──────────┬─────┬───────┐
//	│ klen u16 │ 0 u16 │ vlen u32 │ key │ value │
//	└──────────┴───────┴──────────┴─────┴───────┘
//
// A key lives in the first entry, from Hash(key) mod Buckets on, that
// holds it (linear probing). An empty entry ends a search. A tombstone
// (a deleted key) does not, and the next insert of its chain reuses it.
// The CRCs are CRC64-ECMA.
//
// # Round trips
//
//   - GET hit: 2. READ a window of 4 entries from the key's home entry
//     (one READ; a window ends at the end of the index), then READ the
//     extent of an entry whose fingerprint matches. Check the extent
//     against the entry's extent CRC and compare the key. A fingerprint
//     collision costs another extent READ. A key further along its chain
//     costs another window READ per 4 entries.
//   - GET miss: 1 when an empty entry ends the chain within the first
//     window, plus an extent READ per fingerprint collision on the way
//     and a window READ per 4 entries of a longer chain.
//   - PUT: 1 RPC (a SEND and its reply): u16 key length, key, value.
//   - DELETE: 1 RPC: the key. A DELETE of a missing key is not an error.
//
// A client caches nothing but the layout it gets at connect (region
// address, rkey, Buckets), so there is no cold or warm cache: every GET
// starts at the key's home entry.
//
// # The node's CPU
//
// It runs every PUT and DELETE (Server.CPU adds up their time), one at a
// time under a mutex, which orders them. A PUT looks the key up in the
// index, allocates an extent (a free list per power-of-two class, else
// bump allocation) and writes it, then writes the entry with both CRCs.
// A DELETE writes a tombstone entry. A replaced or deleted extent waits
// in a quarantine of Config.Quarantine (1024) extents before reuse; when
// memory runs out, a PUT takes the oldest quarantined extent of its class
// at once. GETs cost it nothing.
//
// # Failures
//
//   - Torn reads. The node writes an entry while clients READ it, so a
//     READ can return half of it. The entry's own CRC fails, and the GET
//     reads the window again. An extent is written before its entry, so a
//     complete new entry points at a complete extent. An extent freed and
//     reused since its entry was read fails the entry's extent CRC, and the
//     GET reads again. After 65,536 such retries in a row the GET fails
//     with kv.ErrUnreachable. Client.Retries counts them.
//     TestTornReadsCaught writes entries and extents a few bytes at a time
//     and checks that no GET returns a wrong value (and that, with the
//     checks off, some would).
//   - A full table. An insert fails with kv.ErrFull when no entry of the
//     whole index is empty or a tombstone. A PUT also fails with kv.ErrFull
//     when extent memory runs out. A deleted key keeps a tombstone entry until an insert
//     reuses it, so Buckets bounds the keys plus the tombstones.
//   - A dead writer. Writes are RPCs that the node runs whole, so a client
//     that dies holds nothing: its last PUT happened or it did not.
//   - A failed connection: kv.ErrUnreachable. A node restart loses the
//     data (docs/kv.md, Durability).
//
// # Usage
//
//	srv, err := pilaf.NewServer(nodePD, pilaf.Config{Buckets: 1 << 16, Memory: 64 << 20})
//	...
//	go srv.Serve(ctx, nodeQP, nodeCQ)
//
//	c, err := pilaf.NewClient(ctx, pd, qp, cq, pilaf.ClientConfig{}) // qp connected to nodeQP
//	...
//	err = c.Put(ctx, []byte("hello"), []byte("world"))
//	v, err := c.Get(ctx, []byte("hello"), nil)
//	err = c.Delete(ctx, []byte("hello"))
//
// The runnable Example in kv/stores shows the whole setup, devices and
// connection included, through stores.NewServer("pilaf", ...) and
// stores.NewClient.
//
// # Files
//
// layout.go (entries and extents), server.go (the node: layout, the PUT
// and DELETE handlers, extent memory), client.go (GET by READs, PUT and
// DELETE by RPC).
package pilaf

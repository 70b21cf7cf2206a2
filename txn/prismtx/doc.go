// Package prismtx is PRISM-TX: serializable distributed transactions
// whose commit runs entirely as one-sided PRISM operations executed by
// the memory nodes' NICs, after "PRISM: Rethinking the RDMA Interface for
// Distributed Systems" (Burke et al., SOSP'21, §8). It implements
// txn.DB; timestamps come from loosely synchronised clocks (Meerkat's
// idea), validation is done by enhanced compare-and-swap, and new
// versions are installed by ALLOCATE and a greater-than CAS, the chain of
// PRISM-RS.
//
// # One copy per shard
//
// Keys are sharded over the memory nodes by txn.Shard; each node holds
// one shard, and each shard has ONE copy, as in the paper: there is no
// replication. A node that fails or restarts loses its shard, and the
// transactions that touch it fail with txn.ErrUnreachable until it is
// back (empty). Use at least three nodes so that keys spread.
//
// # What a node holds
//
// One region per node, so that an indirect READ follows a slot's pointer
// under one rkey (Node, server.go; layout.go has the byte-level detail):
//
//	[0, 64·Slots)   slots, one per key (64 bytes, a cache line)
//	absent          the absent item: a claimed slot's version before its first write
//	records         decision records, 16 bytes per client id
//	ring            the return ring (prism.ReturnRing)
//	pool            versions: ALLOCATE free lists of 64 B … 8 KiB (prism.Pool)
//
//	slot, native-order words (the first half is what the protocol CASes)
//	┌────┬────┬─────┬───┬────────┬───┬─────────┬────────┐
//	│ PW │ PR │ ptr │ C │ key id │ 0 │ pendPtr │ pendTS │
//	└────┴────┴─────┴───┴────────┴───┴─────────┴────────┘
//
// PW is the highest prepared writer's timestamp, PR the highest prepared
// reader's, C the last committed writer's, ptr its version: an item
// ⟨TS | key | value⟩ in a buffer from ALLOCATE, never modified while
// reachable (a delete installs a tombstone item). pendTS and pendPtr are
// the version a prepared writer ALLOCATEd. ⟨ptr, C⟩ is a bounded pointer
// (PRISM's ⟨pointer, bound⟩) whose bound is C: a GET reads through it
// under the NIC's atomics lock, so it never sees an install half-done (C
// swapped, ptr not yet), which a plain pointer load can, and which let a
// transaction validate against the new C with the old version's value (a
// lost update the checker caught); the bound matters only for C = 0, a key
// never written, whose read returns no bytes. A timestamp is ⟨clock time in
// µs (48 bits), client id (16 bits)⟩ in one word, so integer order is
// timestamp order (clock.go). Invariant: C ≤ PW.
//
// A key's slot is found by linear probing from its home slot; a slot is
// claimed for a key by one CAS of its key id (a 64-bit hash independent
// of the placement hash; the item's key is compared on every read) and
// stays that key's forever — slots never become empty again, so clients
// looking for one key meet at one slot and the client's slot cache is
// never stale. Reading an absent key claims its slot too: absence is then
// validated like any value.
//
// # A transaction
//
//	client                                       node NICs (one list per key, all keys at once)
//	execute  Get ── READ slot[0:32] + bounded indirect READ through ⟨ptr, C⟩ ──▶ ⟨PW, PR, ptr, C⟩, the version
//	         Put, Insert, Delete buffered (Insert and Delete read the key)
//	         TS = ⟨now, id⟩, later than every RC read
//	prepare  read key:  CAS16 ⟨PW,PR⟩ < ⟨RC,TS⟩ ? PR = TS                ──▶ old ⟨PW, PR⟩
//	         write key: CAS32 PW = C = RC ? PW = TS, then (CONDITIONAL)
//	                    ALLOCATE ⟨TS|key|value⟩ → scratch, READ its address,
//	                    CAS16 pendTS < TS ? ⟨pendPtr, pendTS⟩ = ⟨addr, TS⟩  ──▶ old ⟨PW, PR, ptr, C⟩, old pend
//	decide   at the coordinator (id mod nodes: the node with most writes), one list:
//	         CAS16 record[id].ts < TS ? ⟨TS, commit⟩, then for each write there
//	         (CONDITIONAL) CAS32 C < TS ? ⟨ptr, C⟩ = ⟨pendPtr, pendTS⟩  ──▶ old record, old ⟨ptr, C⟩s
//	install  writes on the other nodes: the same install CAS           ──▶ old ⟨ptr, C⟩ (in the background)
//	abort    write key whose PW was raised: CAS C < TS ? C = TS
//
// Read validation is the spec's single enhanced CAS: ⟨PW, PR⟩ compared
// with ⟨RC, TS⟩, greater-than, swapping PR only. Since PW ≥ C ≥ RC, the
// old value tells a conflict (PW ≠ RC: a writer prepared or committed
// since the read) from "no update needed" (PW = RC, PR ≥ TS) and from
// success. A write validation passes when PW = C = RC (for a key also
// read; for a blind write, the C last seen, and again with the C found
// when that guess was stale) and then checks TS > PR from the same old
// value; raising PW first is safe, as the spec says. Keys read and
// written validate with the write CAS alone: PW = C = RC is the read's
// validation too. Each key's chain runs in its own list, all of them
// posted at once: one round trip per phase whatever the number of keys
// and nodes.
//
// Serializable in timestamp order: a reader validated at TS guarantees
// that no writer with a timestamp in (RC, TS) has prepared (PW = RC) nor
// will (PR ≥ TS fails any such writer's check TS' > PR); a writer
// installs at TS only after PW = TS held with no reader above it
// prepared; versions are installed in timestamp order by the
// greater-than CAS. A GET's two READs are not atomic, but the version
// read is never older than the slot read, so RC = max(C read, version's
// TS) is exact (a C above the version's TS was raised by an aborted
// writer and installed nothing). The trace (Tx.Trace) reports the
// version's own TS.
//
// # Where this departs from the spec, and why
//
//   - One prepared writer per key. The spec's write check is "if TS > PW
//     then PW = TS", and an abort sets C = TS. With two writers prepared
//     on one key, B below A, A's abort raises C above B's timestamp: B's
//     install (C < TS_B) then fails although B committed, and a reader
//     that read C = TS_A validates (PW = RC) and misses B's write. So a
//     write check here also requires PW = C: no writer is prepared on the
//     key, which makes the abort cleanup exact. A second writer aborts
//     with txn.LockConflict instead of queueing behind the first.
//   - A decision between prepare and installation (see Dead clients).
//     It costs no round trip of its own: the client takes an id whose
//     record is on the node with most of the writes, and that node's
//     installs ride in the decision's list, CONDITIONAL on it. Writes on
//     one node commit in 2 round trips after the reads, as in the spec;
//     writes on other nodes are installed in one more, which Commit does
//     not wait for (Config.SyncInstall makes it): the transaction is
//     committed once decided. A GET that meets a prepared writer whose
//     record says commit installs that write itself before reading
//     (rollIfCommitted: installing a committed write needs no lease), so a
//     transaction that begins after a Commit returned sees its writes.
//   - The pending version is set by a CAS that only raises pendTS, not a
//     WRITE: a chain stalled past its lease may run after a resolver
//     aborted its timestamp and another writer took the key, and must not
//     replace that writer's pending version (TestRacingResolvers).
//
// # Dead clients
//
// A client that stops between prepare and the end of its commit leaves
// PW = TS > C on its keys: readers fail validation and writers the lock
// check until TS is resolved. Any client that meets such a PW whose time
// is older than the lease (Config.Lease, 800 ms by default, at most 1 s;
// all clients must use the same) resolves it (resolve.go), as the owner
// would have:
//
//   - It decides first. Each client id has a decision record ⟨ts,
//     verdict⟩ on node id mod nodes; the owner writes ⟨TS, commit⟩ and a
//     resolver ⟨TS, abort⟩, each with a CAS that succeeds only while the
//     record's ts is below TS, so TS gets exactly one verdict and both
//     learn which from the old value.
//   - Abort: C = TS if C < TS on the key (the cleanup); the owner's
//     install CAS (C < TS) can then never succeed there, and the owner,
//     whose decision CAS failed, aborts and cleans up its other keys.
//   - Commit: the resolver rolls the key forward with the owner's own
//     install CAS, whose operand is the pending version in the slot
//     (pendPtr, pendTS: set at prepare, before any verdict could be
//     commit — the owner checks that its pending CAS took — and replaced
//     only by a writer with a later timestamp, which first needs C ≥ TS,
//     when this CAS fails anyway).
//   - A record already past TS: the id's transactions run one at a time
//     and an id is reused only after its transaction ended resolved, so
//     TS was resolved.
//
// So nothing is half-applied: an install happens only under a commit
// verdict, a cleanup only under an abort verdict or by the owner before
// it decides, and every key of a transaction is settled one way. The
// clock decides only when resolving may start (liveness, and needless
// aborts of slow clients if clocks drift by more than the lease), never
// what a transaction became. A slow-but-alive owner is safe at every
// step: its decision fails once a resolver aborted it, its installs
// after a resolver rolled it forward fail harmlessly (C = TS), and a
// pending-version CAS of its that runs late changes nothing. No key
// stays blocked longer than the lease plus the resolver's two round
// trips (TestStoppedClients: 51 clients stopped after prepare, after the
// decision and half-way through installation; TestKilledClientsTCP: the
// same with client processes killed by SIGKILL over tcp).
//
// Client ids (16 bits) are claimed at every node by RPC and unique among
// live clients (MethodClaim). A DB hands one to each committing
// transaction, so an id has one transaction in flight. An id whose
// transaction ended unresolved (a connection failed mid-commit) is never
// used again: the DB drops it, and a node whose connection ends while it
// holds ids burns them (never grants them again), so that a dead id's
// record keeps the verdict resolvers may still need. Close releases the
// clean ones.
//
// # Round trips
//
//   - Get of a key whose slot the DB knows: 1 (a version longer than
//     Config.ReadSize: 2, and the DB reads that key at its length
//     afterwards). The first access to a key looks its slot up: 1 per
//     probe window of 8 slots, plus 1 to claim an empty slot.
//   - Commit: read-only 1; writing 2 (prepare, decide with the
//     coordinator's installs), plus 1 in the background when writes are
//     on other nodes (Stats.Background; waited for with
//     Config.SyncInstall). Stats.RoundTrips / Stats.Commits is the round
//     trips per committed transaction, reads included.
//   - A GET that meets a prepared writer: 2 more (its record, and the
//     install when it committed), then the read again.
//   - Versions replaced by an install (and an aborted transaction's
//     pending versions) go back to the node in batches in the background:
//     their headers READ (for the size class), one FETCH_AND_ADD and one
//     CAS each on the return ring (Stats.Lists counts them).
//
// # The node's CPU
//
// None per transaction. Every NodeConfig.Restock it drains the return
// ring, recycles the returned buffers after quiescing the NIC (so no READ
// through an old pointer sees a buffer's next life) and tops the free
// lists up (Node.CPU). The RPC methods only set clients up.
//
// # Failures
//
//   - A resolved prepared version's buffer (the dead owner's pending
//     version) is lost to the node; so are versions a dead client had
//     not yet returned.
//   - A failed connection: txn.ErrUnreachable. Before the decision the
//     transaction did not commit (resolvers clean its keys up after the
//     lease); after it the transaction committed and Commit returns nil
//     (readers and resolvers finish the installation); if the decision
//     itself did not answer, Commit returns txn.ErrUnreachable and the
//     transaction may have committed.
//   - The DB remembers every key it met (its slot, the length of its
//     version): memory grows with the keys a client touches.
//   - An empty free list: the ALLOCATE is retried like a
//     receiver-not-ready until the node restocks (ClientRNRRetry).
//   - A full table: txn.ErrFull. Two keys with one key id: ErrKeyCollision.
//
// # Negative control
//
// Config.SkipValidation turns validation off: reads are not validated and
// a write's check only takes the key. Write skew then commits
// (TestWriteSkew), which the serializability checker must report.
//
// # Usage
//
//	srv, err := memnode.Start(ctx, memnode.Config{Device: "tcp://10.0.0.1:0", CM: "10.0.0.1:7000",
//		NewService: prismtx.Service(prismtx.NodeConfig{Slots: 1 << 20, Memory: 1 << 30}, nil)})
//	...
//	db, err := prismtx.Dial(ctx, prismtx.Config{Device: "tcp://10.0.0.9:0",
//		Nodes: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}})
//	err = txn.Run(ctx, db, func(tx txn.Tx) error { … tx.Get, tx.Put … })
//
// # Files
//
// server.go (the node: layout, restock, client ids), layout.go (slots,
// items, records), clock.go (timestamps), db.go (Config, Dial, ids),
// conn.go (a node connection and its chains), phase.go (one chain per
// key, all at once), find.go (slots), tx.go (execute: Get, Put, Insert,
// Delete), chains.go (the protocol's CASes), commit.go (prepare, decide,
// install, abort), resolve.go (expired prepared timestamps, committed
// ones met by a GET), returns.go (giving versions back), metrics.go,
// hook.go (test hooks).
package prismtx

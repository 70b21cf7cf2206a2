// Package farm is FaRM's transaction protocol on rdmakit's remote memory:
// optimistic concurrency control whose reads are one-sided READs, whose
// commit is LOCK, VALIDATE, COMMIT-BACKUP and COMMIT-PRIMARY with
// truncation piggybacked on later log records, and whose shards are
// kept in f+1 copies by primary-backup replication. It implements txn.DB
// (DB) and txn.Traced (Tx).
//
// The design is from "FaRM: Fast Remote Memory" (Dragojević, Narayanan,
// Hodson, Castro; NSDI'14) and "No compromises: distributed transactions
// with consistency, availability, and performance" (Dragojević et al.;
// SOSP'15), as PRISM's evaluation uses it for a baseline.
//
// # Placement
//
// A database is a Layout: n memory nodes, as many shards (txn.Shard of a
// key), F backups per shard (default 1). Shard s's primary is node s,
// its backups nodes s+1 … s+F mod n, so every node holds one primary
// copy and F backup copies. Clients read primaries only; backups hold
// the committed writes so that a primary's loss loses nothing, and with
// NodeConfig.Members a lost primary's first backup takes its shard over
// (see Failover).
//
// # Memory layout of a node
//
// Tables, one region (clients may READ it): F+1 copies, each Buckets
// slots of SlotSize bytes; copy 0 is the node's primary shard, copy i the
// shard it is i-th backup of.
//
//	slot (little-endian, SlotSize = 96 + ValueSize rounded up to 64)
//	[0:8)    word: bit 63 lock, bits 0–62 version
//	[8:16)   meta: u8 key length (0: empty) | u8 flags (bit 0 present) | u16 0 | u32 value length
//	[16:24)  CRC64 (ECMA) of version ‖ meta ‖ key ‖ value
//	[24:32)  0
//	[32:96)  key (up to txn.MaxKey)
//	[96:…)   value (up to ValueSize)
//
// A key lives in the first slot of its window [home, home+MaxProbe)
// that holds it, home = hash mod (Buckets−MaxProbe+1) (bounded linear
// probing that never wraps); an empty slot ends a search. Keys never
// move and slots are never emptied (a delete leaves the key, absent, at
// a newer version), so a client caches where a key lives. Versions
// count the writes a slot's key has had: 0 before any, +1 per committed
// write; a transaction's trace reports them.
//
// Logs: one ring per connected client, each a region of its own that
// the client may WRITE (and READ the consumed word of) (ring.go), into which that client, as coordinator,
// WRITEs COMMIT-BACKUP, COMMIT-PRIMARY, abort and truncation records
// (record.go). The node's CPU polls the rings, takes the records in
// order, zeroes them, and publishes how far it got; a coordinator READs that only
// when its own count says the ring is full.
//
// # A transaction and its round trips
//
//   - Get: one READ of the key's primary: the cached slot, or the first
//     FirstProbe (4) slots of its window, and a second READ of the rest of
//     the window (MaxProbe, 32 slots) when those hold other keys. A torn READ (its CRC fails) is read again; a locked object
//     is read again after a pause (its writer may have committed and not
//     installed yet), up to 20 ms, then the transaction aborts. Put
//     buffers; Insert and Delete read first (ErrExists, ErrNotFound at
//     once) and buffer.
//   - LOCK: one RPC per written primary, all at once (HERD-style: the
//     request is WRITTEN into the node's memory, the node polls and
//     answers by SEND). The node's CPU locks every written object whose
//     version is still the one read (or claims an empty slot for a new
//     key) and answers the versions, or refuses: locked (lock conflict)
//     or changed (validation failed); then nothing stays locked there,
//     and abort records release the other primaries' locks.
//   - VALIDATE: one READ list per node whose objects the transaction
//     read and did not write: each word must still be unlocked at the
//     version read (an empty slot still empty). Skipped with
//     Config.SkipValidation: the checker's negative control, not
//     serializable.
//   - COMMIT-BACKUP: one WRITE list per backup of each written shard,
//     all at once, each a record of the shard's writes at their new
//     versions; the coordinator waits for the NICs' acks, not the
//     backups' CPUs.
//   - COMMIT-PRIMARY: one WRITE list per written primary, all at once;
//     Commit returns at the first ack. Each primary's CPU installs the
//     values, bumps the versions and unlocks.
//   - TRUNCATE: once every COMMIT-PRIMARY record is acknowledged, the
//     transaction's number rides on the next records to its backups (or
//     a record of its own within 2 ms); a backup then applies its
//     COMMIT-BACKUP records to its copy and forgets them.
//
// A read-write transaction over w primaries, r other read nodes and F
// backups per shard takes w RPCs, r READ lists, w·F + w log WRITE lists
// and its reads: 4 round trips of latency after execution. A read-only
// transaction of one read commits at once; one of more reads validates
// (one round trip). DB.Stats counts READs, log WRITEs and RPCs.
//
// Serializability: every committed read-write transaction holds all its
// write locks at the instant its LOCK phase ends and validates its reads
// after that instant; its reads saw the values of that instant
// (validation found them unchanged and unlocked), its writes install
// over them under the locks. So it appears to run at that instant, as
// in FaRM. Reads that wait for locks to clear also make it strict: a
// transaction never reads a value that one already committed overwrote.
//
// # Failures
//
// A lock lives at most a lease (NodeConfig.Lease, default 500 ms): a
// primary whose lock is older, or whose client's connection ended,
// recovers the transaction (recovery.go), and so does a backup holding
// COMMIT-BACKUP records a lease after their connection ended or four
// leases without truncation. Recovery:
//
//  1. fences the coordinator at every node holding a copy of a written
//     shard: the connection the transaction uses there moves to
//     ERROR, the node waits for the writes landing in that
//     connection's ring (MR quiescence), takes the records that landed,
//     and takes none after; each node answers whether it holds (or applied) each
//     written shard's COMMIT-BACKUP record;
//  2. decides: commit if every backup of every written shard holds its
//     record, else abort;
//  3. tells those nodes: primaries install or release the locks, backups
//     apply or drop the records. Nodes that do not answer are asked again.
//
// Why no transaction is half applied and none reported committed is
// lost: the decision is a function of the backups' records, and fencing
// freezes them first, so every node that recovers the transaction (a
// primary and a backup may both) decides the same. A coordinator writes
// COMMIT-PRIMARY only after every COMMIT-BACKUP record is acknowledged,
// i.e. landed: if any primary installed, or the coordinator reported
// commit, every backup held its record before the fence, and recovery
// commits too. If some backup lacks its record, no COMMIT-PRIMARY was
// ever written and recovery aborts everywhere: no primary installed.
// After the fence no record of the transaction lands (a commit pins one
// connection per node and writes all its records and LOCKs through it;
// recovery fences exactly those, named by session id in the LOCK
// requests and COMMIT-BACKUP records, and the coordinator's other
// connections live on), so none arrives to contradict the decision; a
// live coordinator whose connection was fenced finds its next write
// failing and returns ErrUnreachable (the outcome is recovery's) rather
// than reporting commit. After a connection failure a coordinator
// probes (a 0-byte READ) the connections it pins for its next commit,
// so that one fenced with the failed one aborts that commit rather than
// leaving it in doubt. Installation is by the primary's CPU
// and idempotent (a commit record for a transaction no longer locked is
// ignored); a backup applies a write only over an older version, so
// records of several coordinators may be applied in any order. A backup
// remembers applied transactions for NodeConfig.Remember (20 leases) to
// answer recoveries: a recovery that cannot finish for longer (a node
// unreachable as long) could take a committed transaction it applied
// for aborted.
//
// The fence's one assumption: a WRITE that the responder found its QP
// receiving holds a reference on the region until it has landed, so
// that moving the QP to ERROR and then quiescing the region
// (verbs.FreeLists.Quiesce) leaves nothing in flight. The soft NIC looks
// at the QP's state again after it has taken the reference, so a WRITE
// either holds the reference when the quiescence looks, or finds the QP
// in ERROR and does not land.
//
// A live coordinator slower than the lease (a loaded machine) is
// recovered like a dead one; its Commit returns ErrUnreachable. Reads
// and LOCKs that fail on a broken connection abort (txn.Timeout, so
// txn.Run retries) while the client reconnects in the background; a
// list without completion, or a LOCK without answer, for 2 s (8 ×
// ClientTimeout) counts as a broken connection.
//
// Without NodeConfig.Members a node's loss stops the shards it is
// primary of (their transactions fail with ErrUnreachable, the others
// go on) until it comes back, and it comes back empty.
//
// # Failover
//
// With NodeConfig.Members (each node's membership address, host:port,
// in the layout's order) the nodes hold a Configuration — an epoch, each
// shard's primary and its backups, the nodes out — in a raft group of
// their own (go.etcd.io/raft/v3; package txn/internal/membership, shared
// with txn/ford): every node of the
// layout is a voter; the raft log is in memory (raft.MemoryStorage);
// raft's messages go over plain TCP between the membership addresses,
// each connection opened by a hello carrying NodeConfig.Token, frames
// bounded to 1 MiB. Membership is decided there: the raft leader notes
// when it last heard from each member (its heartbeats are answered every
// tick, 10 ms); one silent for NodeConfig.Silence (default the lease) it
// proposes out, and when the proposal commits every member applies it
// alike: the node leaves every shard's backups, each shard it was
// primary of gets its first backup as primary, the epoch moves on. A
// majority of the nodes must be up for the configuration to change. A
// node taken out stays out: nothing brings it back, and one that
// restarts comes back empty (its raft log with it) and is not
// re-admitted (re-adding a node is not implemented).
//
// At a new epoch each node, as FaRM's reconfiguration (reconfigure.go):
//
//  1. takes the configuration: a shard it now leads is served from its
//     backup copy, which becomes the copy LOCKs lock and clients READ
//     (it is at the known offset of that copy), and stops admitting
//     clients (MethodOpen answers ErrEpoch);
//  2. fences every client session (its QP to ERROR, the records landed
//     taken, none after) and ends its connection: a transaction under
//     way may hold locks at the lost primary, whose lock table is gone;
//  3. recovers every transaction it holds locks or COMMIT-BACKUP records
//     of, asking only the nodes still in: the decision is the one above
//     over the live log holders of each written shard at the
//     transaction's epoch (commit if they all hold their records; abort
//     when no written shard has a live holder, which with one node lost
//     per epoch is a one-shard transaction whose COMMIT-PRIMARY, had it
//     landed, the fence took). A committed transaction's records are at
//     every live holder, so the new primary's copy has its writes before
//     anyone reads it;
//  4. admits clients again.
//
// Sessions live in one epoch: MethodOpen carries the client's epoch and
// is refused (ErrEpoch) unless it is the node's, and the node fences
// them all when the epoch ends, so everything a session carries (LOCKs,
// records) is of one configuration, and nodes refuse the requests of an
// older epoch by refusing its sessions. Clients learn the configuration
// by MethodConfig (DB.Configuration; at every connection), route READs,
// LOCKs and records by the epoch the transaction began in, and redial a
// fenced connection; a transaction whose connections are not all of its
// epoch aborts (txn.Timeout) and txn.Run retries it at the new one.
//
// A shard left without backup (F = 1 after a loss) logs its decision
// at its primary: its COMMIT-BACKUP records go to the primary's own
// ring (Configuration's log holders), so "every holder holds its record"
// is never vacuous and recovery never commits a transaction that did
// not validate. The primary does not apply them (it installs its own
// locked writes).
//
// A node taken out while alive (partitioned, or slower than Silence)
// that has not learned it is out may still answer READs of clients of
// the old epoch (stale reads), but commits nothing on a shard that has a
// backup: its log holders are other nodes, and those that moved on
// fenced the old epoch's sessions. A second loss before
// the first's reconfiguration ends, or the loss of every copy of a
// shard, is not handled.
//
// # Serving and connecting
//
//	srv, err := memnode.Start(ctx, memnode.Config{Device: "tcp://10.0.0.1:0", CM: "10.0.0.1:7000",
//		NewService: farm.Service(farm.NodeConfig{}, nil)})
//
//	db, err := farm.Create(ctx, farm.Config{Device: "tcp://10.0.0.9:0", Nodes: addrs}, farm.Layout{})
//	err = txn.Run(ctx, db, func(tx txn.Tx) error { ... })
//
// Create gives the layout to every node (again is harmless); Dial
// connects to a database that exists and learns its layout.
//
// # Files
//
// layout.go (Layout, slots), ring.go (log rings), record.go (records and
// LOCK requests), node.go (the Service, sessions, MethodCreate and
// MethodOpen), table.go (the node's CPU: LOCK, install, backups, records),
// poll.go (the ring poller, the lease scanner), recovery.go, peers.go
// (node to node connections), client.go (DB), conn.go (a client's
// connection to a node), tx.go (execution), commit.go (the commit
// phases), stats.go (counters), configuration.go (Configuration),
// membership.go (the raft group, from txn/internal/membership),
// reconfigure.go (a node's move to a new epoch), config_rpc.go
// (MethodConfig).
package farm

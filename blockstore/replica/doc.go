// Package replica is one replica of a replicated block store volume
// (package blockstore), served as a memnode.Service: the memory node
// library does the connections (handshake, token, liveness probes,
// release), the replica holds the volume and answers the RPCs that need
// its CPU. Both designs use the same replica processes: PRISM-RS
// (blockstore/prismrs) reaches the volume's PRISM-RS region by one-sided
// operations only; ABD over RPC (blockstore/abdrpc) runs each protocol
// phase in the replica's CPU with MethodRead, MethodReadTag and
// MethodWrite. The two keep separate copies of each block: a volume is
// written through one design.
//
// # The volume
//
// A replica starts empty. MethodCreate makes the volume from a
// blockstore.Layout (block size, count, replica list), once; any client
// then learns the layout and the region's addresses with MethodInfo, so
// a client needs only the replica list. Creating it again with the same
// layout succeeds; another layout fails with ErrExists. A volume that
// would take more than Config.MaxMemory, or blocks larger than
// Config.MaxBlockSize, is refused (blockstore.ErrOutOfRange,
// blockstore.ErrBlockSize).
//
// # The PRISM-RS region
//
// One registered region, so that an indirect READ follows a slot to its
// buffer under one rkey:
//
//	[0 : 16·Blocks)     slots, one per block, 16-byte aligned
//	zero (↑64)          the zero buffer: tag 0 then BlockSize zero bytes
//	ring (↑64)          the return ring (prism.ReturnRing)
//	pool (↑BufSize)     ⟨tag | data⟩ buffers of BufSize bytes (prism.Pool, one class)
//
//	slot (native byte order; one 16-byte enhanced CAS changes it)
//	┌──────────────────────┬──────────────────────┐
//	│ buffer address u64   │ tag u64              │   never written: ⟨zero buffer, 0⟩
//	└──────────────────────┴──────────────────────┘
//
//	buffer (never modified while a slot points to it)
//	┌──────────────────────┬──────────────────────────────┐
//	│ tag u64 (LE)         │ data, BlockSize bytes        │
//	└──────────────────────┴──────────────────────────────┘
//
// A Tag is ⟨timestamp u32, client id u32⟩ as one integer, the timestamp
// high: integer order is ABD's tag order. An indirect READ of a slot
// returns the buffer, whose first 8 bytes are its tag. A write ALLOCATEs
// a buffer holding ⟨tag | data⟩ and installs ⟨address, tag⟩ with a
// 16-byte masked CAS that compares only the tag word, greater-than: the
// pointer is installed after the buffer is written, so a reader never
// sees a partly written block. The client whose CAS replaced a buffer
// returns it through the return ring; the replica's CPU recycles
// returned buffers only after quiescing the NIC (prism.Pool.Reclaim), so
// no READ still in flight through an old pointer sees the buffer's next
// life. That upkeep, every Config.Restock, is all the CPU PRISM-RS costs
// a replica (Replica.CPU).
//
// # RPC methods
//
// Package rpc over the client's connection; payloads little-endian:
//
//	MethodInfo     (1)  ""                          → Info.Marshal
//	MethodCreate   (2)  MarshalLayout               → Info.Marshal
//	MethodClaim    (3)  u32 client id               → u8 1            (ErrIDTaken)
//	MethodReadTag  (4)  u64 block                   → u64 tag
//	MethodRead     (5)  u64 block                   → u64 tag | data
//	MethodWrite    (6)  u64 block | u64 tag | data  → u64 previous tag | u8 installed
//
// While the replica recovers (Recovery, below), every method but
// MethodClaim and MethodWrite fails with ErrRecovering.
// MethodWrite installs data only if tag is greater than the block's
// (under the block's lock); either answer is an ack for ABD. Errors
// come back as *rpc.RemoteError whose text starts with the typed error's;
// MapErr turns them back into blockstore.ErrNoVolume, ErrBlockSize,
// ErrOutOfRange, ErrReplicas, ErrProtocol, ErrExists, ErrIDTaken or ErrRecovering. A
// client's rpc MaxMessage must be at least MaxMessage(BlockSize) for
// MethodRead and MethodWrite, and MaxInfo+rpc.Header for the others.
//
// # Recovery
//
// A replica keeps its volume in memory only: one that restarts comes
// back empty, and must not count in a quorum as it is, or it weakens
// every quorum it is in (a write acknowledged by it and one other
// replica would then live at one replica only, and a failure of that one
// would lose it). It rejoins instead (Config.Join; 'rdmakit rs replica
// --join'):
//
//  1. From the start it is not a member: MethodInfo, MethodCreate,
//     MethodRead and MethodReadTag fail with ErrRecovering. Clients of
//     both designs take a replica into their quorums only once its
//     MethodInfo describes their volume, and re-dial the others in the
//     background, so they leave it out and take it in once it answers.
//     No client learns the PRISM-RS region's rkey and addresses before
//     then, so nobody but the replica's CPU touches its slots.
//  2. It dials the other replicas and asks each for the volume
//     (MethodInfo); at least f+1 of the 2f others must answer as members
//     of one volume whose replica list is its own. While fewer do it
//     retries, with a pause doubling from JoinConfig.Retry to MaxRetry,
//     and logs why; closing the replica (SIGTERM) stops it.
//  3. It lays the volume out from their layout, still recovering.
//  4. It copies every block, JoinConfig.Window blocks at a time, from
//     every donor it reached — at least f+1 — and from both designs'
//     copies: the PRISM-RS buffer by a one-sided indirect READ through
//     the donor's slot (the donor's NIC; the same READ as a PRISM-RS
//     read's phase 1, so the tag and data belong together), the RPC
//     store's ⟨tag, data⟩ by MethodRead (the donor's CPU, under the
//     block's lock). Per block and design it installs the largest tag's
//     data, greater-than: a PRISM-RS buffer the CPU carves
//     (prism.Pool.Take), fills, then points the slot to; the RPC store
//     by MethodWrite's rule. A donor that fails mid-copy is dropped; if
//     fewer than f+1 are left the attempt fails and the next one starts
//     over (installs are idempotent: never over a newer tag).
//  5. It becomes a member: MethodInfo answers, clients take it in.
//
// Why nothing acknowledged is lost: a write (or a read's write-back)
// acknowledged before the copy read its block is held — that tag or a
// newer one — by f+1 replicas, its ack set. The replica's earlier life
// may be one of them, so at least f of the 2f others hold it. The copy
// reads f+1 of the 2f others, and f+1 + f > 2f: it meets the ack set,
// so the replica ends with that tag or a newer one (with n = 3, f = 1:
// it must read both others). A write acknowledged after its block was
// read has an ack set of f+1 replicas that are not this one (no client
// reaches it yet) — still a majority of all n, which meets every
// majority the replica is later part of. So every majority holds every
// acknowledged write again, as before the restart, as long as at most f
// replicas are down or recovering at any time (two recovering at once
// do not count each other: neither answers MethodInfo).
//
// The buffer pool is fresh too: the restarted region has a new rkey, and
// PRISM-RS clients return to it only the buffers they replaced in it (a
// client returns the previous life's buffers only to the same rkey and
// slots address). Never create the volume again on a restarted replica
// (MethodCreate: prismrs.Create, abdrpc.Create): that would make it a
// member, empty. 'rdmakit rs create' checks first, and leaves a volume
// that a majority holds as it is.
//
// # Serving a replica
//
// A replica is a memory node serving this package's Service:
//
//	srv, err := memnode.Start(ctx, memnode.Config{Device: "tcp://10.0.0.1:0", CM: "10.0.0.1:7000",
//		NewService: replica.Service(replica.Config{MaxMemory: 4 << 30}, nil)})
//
// Clients dial its CM address (the address that goes in the volume's
// replica list) with DialOptions, and talk to it with an rpc.Client
// whose MaxMessage is at most MaxMessage(Config.MaxBlockSize) and whose
// Slots are at most Config.Recvs.
//
// # Client ids
//
// Writers' tags carry their client id, so two live writers must not
// share one. A client claims a random id at every replica
// (MethodClaim) and keeps it only if a majority grants it and none
// refuses: two claims of one id meet at some replica of any two
// majorities. A claim lasts as long as its connection. Within a client,
// two writes of one block at once read the same latest tag: Issuer hands
// out their tags so that they never share one (one tag on two values
// would let reads agree on a block's tag and not on its value).
package replica

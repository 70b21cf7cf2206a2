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
// MethodWrite installs data only if tag is greater than the block's
// (under the block's lock); either answer is an ack for ABD. Errors
// come back as *rpc.RemoteError whose text starts with the typed error's;
// MapErr turns them back into blockstore.ErrNoVolume, ErrBlockSize,
// ErrOutOfRange, ErrReplicas, ErrProtocol, ErrExists or ErrIDTaken. A
// client's rpc MaxMessage must be at least MaxMessage(BlockSize) for
// MethodRead and MethodWrite, and MaxInfo+rpc.Header for the others.
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

// Package prismrs is PRISM-RS: a linearizable replicated block store
// whose replicas spend no CPU on reads and writes. It is multi-writer
// ABD (Lynch and Shvartsman's atomic register, one per block) with each
// phase mapped onto PRISM's primitives, as in "PRISM: Rethinking the
// RDMA Interface for Distributed Systems" (Burke et al., SOSP'21, §7):
// every phase is one list of one-sided operations at every replica,
// executed by the replica's NIC, and an operation completes once a
// majority of the n = 2f+1 replicas answered, so it stays available
// while f replicas are down or slow.
//
// # What a replica holds
//
// Package blockstore/replica: per block a 16-byte slot ⟨buffer address,
// tag⟩, and ⟨tag | data⟩ buffers that never change while a slot points
// to them. A tag is ⟨timestamp u32, client id u32⟩ as one integer
// (replica.Tag), so integer order is ABD's tag order. A block never
// written points to the replica's zero buffer with tag 0.
//
// # Read
//
//	client                          each replica (its NIC)
//	  │── indirect READ slot[id] ──────▶ follows the slot's pointer,
//	  │◀──────── ⟨tag | data⟩ ─────────  returns the buffer
//	  │  (wait for a majority; the largest tag's data is the answer)
//	  │
//	  │  phase 2, only if the majority's tags differ:
//	  │── install chain (below) with that tag and data ──▶ replicas that
//	  │                                                    answered an older tag,
//	  │                                                    and those that did not answer
//	  │◀── acks until a majority holds the tag ──
//
// Phase 1 is one round trip: the indirect READ returns the whole
// buffer, tag included, from a single pointer load, so the tag and the
// data always belong together. Phase 2 makes the answer stick: without
// it a read could return a write that reached one replica, and a later
// read that misses that replica the older value (TestNegativeControl
// shows porcupine catching exactly that). It is skipped when every
// answer of the majority carries the same tag: the value is already at
// a majority.
//
// # Write
//
//	client                          each replica (its NIC)
//	  │── READ slot[id].tag ────────────▶
//	  │◀──────────── tag ───────────────   (wait for a majority)
//	  │  new tag = ⟨largest timestamp + 1, client id⟩
//	  │
//	  │── install chain, one list ──────▶ ALLOCATE a buffer, write ⟨tag | data⟩ into it,
//	  │                                     its address → the QP's scratch area
//	  │                                   WRITE the tag next to it (scratch+8)
//	  │                                   CONDITIONAL 16-byte CAS on slot[id]: compare the
//	  │                                     tag word, greater-than; swap in ⟨address, tag⟩
//	  │                                     from the scratch area (INDIRECT_ARG)
//	  │                                   READ the address back from the scratch area
//	  │◀── previous ⟨pointer, tag⟩, address ──  (wait for a majority of acks)
//
// A CAS that finds a tag at least as new does not install, and is still
// an ack: the replica holds a newer value, which ABD allows. The pointer
// is installed only after the buffer is fully written, by one atomic
// CAS, so a reader never sees a torn block.
//
// # Round trips and replica CPU
//
//   - Read: 1 (phase 1) when a majority agrees, 2 when it writes back.
//   - Write: 2 (the tags, then the install chain).
//   - Each round trip is one list per replica, posted to all replicas at
//     once; the operation waits for the fastest majority.
//   - Returning replaced buffers: batched in the background, ReturnBatch
//     (32) per replica or every 10 ms; one FETCH_AND_ADD and one CAS per
//     buffer on the replica's return ring. Phases counts the phases,
//     RoundTrips their lists (one per replica reached), neither the
//     returns.
//   - Replica CPU: none per operation. The replica's restock loop tops
//     its free list up and recycles returned buffers after quiescing its
//     NIC (replica.Replica.CPU).
//
// # Faults
//
//   - A slow or paused replica: each operation posts to every replica it
//     can and returns with the first majority. The lists still in flight
//     complete in the background, each holding one of the replica's
//     Config.Slots slots until it answers; a replica whose slots are all
//     held gets an operation's list as soon as one frees up, and is left
//     out meanwhile. Nothing else waits for it.
//   - A dead replica, or one that stops answering for longer than the
//     connection's retry budget (Config.Timeout × 8, 2 s by default): its
//     connection fails, the lists in flight to it fail, and operations
//     go on with the others. The client dials it again in the
//     background (every 10 ms at first, then up to every second) and
//     uses it again once it answers as a member of the volume: its
//     layout the client's. So does a replica unreachable at Dial. With
//     more than f replicas gone, operations fail with
//     blockstore.ErrNoQuorum at once; when a majority does not answer
//     before the context ends, with ErrNoQuorum wrapping the context's
//     error. A replica that restarts empty holds no volume and is not
//     used. One restarted with a join (replica.Config.Join, 'rdmakit rs
//     replica --join') answers MethodInfo with replica.ErrRecovering
//     while it copies every block's latest ⟨tag, data⟩ from f+1 of the
//     others, so it is not used either; the client's background dialing
//     takes it in once it answers as a member, with the new region's
//     rkey. Buffers the client replaced in the old region are not
//     returned to the new one (a different rkey). See package
//     blockstore/replica, Recovery, for why no acknowledged write is
//     lost.
//   - A writer that dies half-way: its tag may be at fewer than a
//     majority of the replicas. A read that sees it writes it back
//     before returning it, so it is then as good as written; a read that
//     does not see it returns the older value, as if the write had not
//     happened yet. A buffer allocated by a dead writer but never
//     installed is lost to its replica.
//   - Client ids: a client claims a random 32-bit id at every replica
//     (replica.MethodClaim) and keeps it only when a majority grants it
//     and none refuses, so two live clients never share an id (two
//     majorities meet). The claim ends with the client's connection.
//     A client is safe for concurrent use: two of its writes of one
//     block at once read the same latest timestamp, so its tags come
//     from a replica.Issuer, which never hands out one tag twice for a
//     block (one tag on two values would let reads agree on the tag
//     and not on the value).
//   - A replica that answers garbage (a layout that does not decode, or
//     disagrees with the others) is left out at Dial; without a
//     majority of good ones Dial fails with blockstore.ErrNoVolume, or
//     ErrNoQuorum wrapping what each replica did wrong (ErrProtocol for
//     garbage).
//
// # Usage
//
//	c, err := prismrs.Create(ctx, prismrs.Config{Device: "tcp://127.0.0.1:0",
//		Replicas: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}}, 4096, 1<<16)
//	...
//	err = c.Write(ctx, 42, block)     // len(block) == 4096
//	b, err := c.Read(ctx, 42, nil)
//
// A second client calls Dial with the same replica list. Clients of one
// process may share a device (Config.Dev). The runnable Example runs
// three replicas and two clients on a loop fabric.
//
// # Files
//
// client.go (Config, Dial, Create, the client id claim), conn.go (a
// replica connection and its slots), reconnect.go (dialing a failed
// replica again), phase.go (posting a phase at every replica and waiting
// for a majority), read.go, write.go (the phases), returns.go (returning
// replaced buffers).
package prismrs

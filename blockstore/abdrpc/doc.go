// Package abdrpc is the block store design PRISM-RS is compared with:
// multi-writer ABD (Lynch & Shvartsman's atomic register, a register per
// block) where each replica's CPU runs the protocol's phases, as a
// traditional replicated store does. The client implements
// blockstore.Store over the replicas of package blockstore/replica,
// reached through their memory nodes (memnode) by cm connections that
// carry package rpc's calls; the replica methods are
// replica.MethodRead, MethodReadTag and MethodWrite, each run under the
// block's lock.
//
// # Protocol
//
// A tag is ⟨timestamp, client id⟩ (replica.Tag: compared as one
// integer, timestamp first). Every replica holds, per block, the newest
// ⟨tag, data⟩ it was given; a block never written is ⟨0, zeros⟩. A
// majority is n/2+1 of the n = 2f+1 replicas; any two majorities share
// a replica, which is what makes the register linearizable.
//
//	Read(id)                                     2 round trips, 1 when a majority agrees
//	  phase 1  MethodRead(id) → ⟨tag, data⟩   at every replica; wait for a majority
//	           take the largest tag t and its data
//	  phase 2  MethodWrite(id, t, data)       at every replica that did not answer t;
//	           (write-back)                   wait until a majority holds t (those
//	                                          that answered t count)
//	           skipped when the whole majority answered t
//	  return data
//
//	Write(id, data)                              2 round trips
//	  phase 1  MethodReadTag(id) → tag        at every replica; wait for a majority
//	           t = ⟨max timestamp + 1, own client id⟩
//	  phase 2  MethodWrite(id, t, data)       at every replica; wait for a majority of acks
//
// A replica installs a MethodWrite only if its tag is newer than the
// block's; an older one is still an ack (the replica holds a tag at
// least as new). The write-back makes a read's value stick: once a read
// returns t, a majority holds t or newer, and every later operation's
// phase 1 sees it.
//
// # Client ids
//
// Two writers must not share a client id, or two writes could carry one
// tag with different data. Dial picks a random id and claims it at every
// replica (replica.MethodClaim); it keeps it when a majority grants it
// and none of the replicas it reached refuses it (a live client holds it
// there), and tries another id otherwise. A claim lasts as long as its
// connection; a re-dialed replica is asked again, and one that refuses
// stays down (re-dialed later).
//
// # Calls, stragglers and failures
//
// Every phase sends its calls to all replicas at once, one goroutine
// each, and returns at the answers it needs. The calls still in flight
// (the stragglers) go on for a millisecond, so that their requests go
// out and the slower replicas keep up (a replica left without the
// writes lags, and costs later reads their write-back), and are then
// cancelled (package rpc drops their late answers); they let go of the
// operation's buffers, which the last of them recycles. The stragglers
// held at once are thus bounded by a millisecond of operations. A replica that
// answers an error (its handler's, mapped back by replica.MapErr) or
// garbage (blockstore.ErrProtocol) counts as failed for the phase; the
// phase fails as soon as a majority can no longer answer. A replica
// whose connection fails is marked down and re-dialed in the background
// (Config.Redial, doubling up to Config.MaxRedial; the replica must still
// hold the volume); a phase waits for it to come back and asks it again,
// so an operation that cannot reach a majority waits until its context
// ends and then fails with blockstore.ErrNoQuorum wrapping the context's
// error: give operations a deadline.
//
// A replica that restarted holds nothing: one started empty holds no
// volume (blockstore.ErrNoVolume), one restarted with a join
// (replica.Config.Join, 'rdmakit rs replica --join') answers
// replica.ErrRecovering while it copies every block from f+1 of the
// others. Either way its MethodInfo does not describe the client's
// volume, so the re-dialer keeps it out of the phases until it does:
// then it is a member again, holding every acknowledged write (package
// blockstore/replica, Recovery, says why).
//
// Dial needs a majority reachable and agreeing on one volume
// (replica.MethodInfo); it gives up on the slower replicas shortly after
// a majority answered, and re-dials them in the background. Create makes
// the volume on every replica it reaches, a majority at least.
//
// # Cost
//
// Per operation: 2 round trips (1 for a read whose majority agrees),
// n requests per phase, and replica CPU for every request — which is
// what PRISM-RS removes: its phases are one-sided indirect READs and
// ALLOCATE + enhanced CAS chains that the replica's CPU never sees.
//
// # Files
//
//	client.go   Config, Client, its lifetime
//	setup.go    Dial, Create: connecting, the volume's layout, the client id claim
//	abd.go      Read and Write: the ABD phases
//	phase.go    one phase: parallel calls, the majority, stragglers
//	link.go     a connection to one replica, marking down, re-dialing
package abdrpc

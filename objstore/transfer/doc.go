// Package transfer moves sealed objects between object stores (package
// objstore): a Server serves a holder's object.Source, a Fetcher pulls
// objects into a fetcher's object.Sink and implements object.Fetcher. It
// implements the protocols of the Plasma-over-RDMA thesis (seed 004, §3):
// SEND/RECV through pre-posted slots for small objects, a READ rendezvous
// for large ones, the hybrid that switches between them at a size
// threshold, and two plain-TCP baselines (Plasma's 4 KB socket path and a
// bulk copy), so an experiment can compare all five.
//
// # Use
//
//	srv, _ := transfer.NewServer(ctx, holderStore, holderDev, "127.0.0.1:0", "127.0.0.1:0", transfer.Config{})
//	f, _ := transfer.NewFetcher(transfer.Config{
//		Protocol: transfer.Hybrid, Threshold: 32 << 10,
//		Device:   fetcherDev,                // for the verbs protocols
//		Peers:    []string{srv.VerbsAddr()}, // srv.TCPAddr() for TCP4K, TCPBulk
//	})
//	errs := f.Fetch(ctx, ids, fetcherStore)
//
// Config.Peers is the directory: a fetch asks the holders in order (the
// one where the ID was last found first) until one has the object. Both
// sides must use the same Slots and SlotSize.
//
// # Pairs
//
// A fetcher keeps one pair per holder: an RC QP connected with package
// cm (the holder listens on its device, the fetcher dials), its own PD,
// CQ, Slots receive slots and Slots send buffers of SlotSize bytes, and
// an 8-byte probe region the peer may READ. The pair is made on the first
// fetch from that holder and reused by every later one (Stats.Pairs and
// Stats.BufferBytes do not move); many transfers share it at once, told
// apart by a transfer id. The PD is the pair's alone, so an object's
// rkey works through this QP and no other; it dies at FIN, or when the
// pair closes (the QP is destroyed, then every region is deregistered).
// With Config.Arena — the store's memory registered once, e.g. the MR
// given to objstore as Config.Memory — objects inside it are READ by the
// arena's keys with no registration per transfer, and pairs share the
// arena's PD; the rkey is then per store, not per object and pair (see
// Config.Arena for the trade-off).
//
// A poller goroutine per pair polls its CQ (Config.Poll: spin, yield,
// park) and dispatches what arrives; a holder serves each pair's requests
// with Config.Workers goroutines.
//
// # SEND/RECV (two-sided)
//
//	fetcher                                        holder
//	TRANSFER {tid, id, mode, threshold} ─────────▶
//	                                               Pin(id)
//	                          ◀───────── DATA {tid, dataSize, metaSize, SendRecv}
//	Sink.Create (on the poller)
//	                                               copy object → send buffer
//	                          ◀───────── CHUNK {tid, offset, ≤ SlotSize-16 bytes}
//	copy slot → object, re-post the slot           … more CHUNKs, as credits allow
//	(full size)                                    release the pin after the last copy
//	                          ◀───────── CHUNK (last)
//	commit (seal)
//	ACK {credits} ───────────────────────────────▶ (when ackAt credits are owed)
//
// Each side copies once in user space, as in the thesis; a holder that
// has nothing is answered NOT_FOUND {tid}.
//
// # READ rendezvous (one-sided)
//
//	fetcher                                        holder
//	TRANSFER {tid, id, mode, threshold} ─────────▶
//	                                               Pin(id); RegMR(object, REMOTE_READ)
//	                          ◀───────── DATA {tid, dataSize, metaSize, Read}
//	Sink.Create                ◀───────── READ_INFO {tid, addr, rkey, len}
//	RegMR(object, LOCAL_WRITE)
//	RDMA READ addr..addr+len ──────────────────▶  (the holder's NIC serves it;
//	  (several READs when len > MaxMsgSize)         no holder code runs)
//	◀──────────────────────────────────────────── data, straight into the object
//	deregister
//	FIN {tid, done} ─────────────────────────────▶ deregister, release the pin
//	commit (seal)
//
// No user-space copy on either side. A fetcher that gives up after
// READ_INFO sends FIN {tid, aborted}; one that cannot create the object
// (it exists, the store is full) or was cancelled before READ_INFO has
// its poller answer READ_INFO with that FIN.
//
// # Hybrid
//
// The fetcher sends its mode and threshold with each TRANSFER and the
// holder, which knows the size, decides with the thesis' corrected
// inequality: dataSize+metaSize >= Threshold → READ, else SEND/RECV
// (default 32 KiB, the thesis' IB_READ_MIN_SIZE). Empty objects are a
// DATA and nothing else. A holder whose device cannot register memory in
// place (verbs.MemRegistrar missing or refusing, as memfd-shared devices
// do) sends by SEND/RECV instead, and a fetcher whose device cannot asks
// for SEND/RECV only. Tune measures the crossover on this
// machine; see its doc for how `rdmakit objstore tune` calls it.
//
// # Messages
//
// Every control message and chunk is one SEND of at most SlotSize bytes,
// little endian, starting with an 8-byte header:
//
//	type u8 | version u8 (1) | credits u16 | transfer id u32
//
//	TRANSFER   id [20] | mode u8 | 0 [3] | threshold u64   36 bytes  fetcher → holder
//	DATA       dataSize u64 | metaSize u64 | protocol u8   25 bytes  holder → fetcher
//	NOT_FOUND  —                                            8 bytes  holder → fetcher
//	CHUNK      offset u64 | payload                   16 + n bytes  holder → fetcher
//	READ_INFO  addr u64 | rkey u32 | len u64               28 bytes  holder → fetcher
//	FIN        status u8 (0 done, 1 aborted)                9 bytes  fetcher → holder
//	ACK        — (transfer id 0)                            8 bytes  either way
//
// Decoding checks the version, the type, the exact length, the ranges
// (sizes up to 2^40, no address overflow, a known protocol) and a non-zero
// transfer id before anything is used, and the roles check the order:
// a DATA or CHUNK for a transfer that is not waiting for one, a CHUNK
// past the object's end or out of order, a READ_INFO whose len is not the
// created object's size, a FIN nobody waits for, a message type the side
// never receives. Any of these fails the pair with an error wrapping
// object.ErrProtocol (the fetch's error wraps it and
// object.ErrUnavailable); nothing panics. FuzzDecodeMessage fuzzes the
// decoder.
//
// The TCP baselines use Plasma's framing on a plain connection: request
// {type u8 = 1, mode u8, id [20]}, reply {status u8 (0 found, 1 not
// found), dataSize u64, metaSize u64}, then the object's bytes — at most
// 4096 per write and read for TCP4K, one write and io.ReadFull over 4 MiB
// socket buffers for TCPBulk — straight from the pinned object and into
// the created one.
//
// # Flow control
//
// Credits, not the thesis' stop-and-wait: each side starts with Slots
// credits, one per receive slot the peer posted. A SEND takes one; the
// receiver re-posts the slot (always at its full size) as soon as it has
// consumed the message and owes the sender a credit, which travels in
// the credits field of its next message or, once ackAt = max(2, Slots/2)
// are owed, in an ACK of its own. So no SEND ever meets a missing
// receive (no RNR) and many transfers stream at once. Two rules keep the
// window from locking when both sides fill it at the same moment: a data
// or control message never takes a side's last credit — only an ACK may,
// and an ACK carries at least ackAt ≥ 2 credits — and Slots ≥ 3. (With
// no messages in flight, a stuck state needs both sides at zero credits
// owing all Slots; the side whose last SEND came later had, by then,
// either received the other's last message, and returned its credit, or
// not, and then the other's last SEND was an ACK whose credits it still
// holds.) A fetcher keeps at most 4×Slots transfers in flight per pair
// (a holder's request queue holds that many; more is a protocol error),
// so a holder's memory per pair is fixed: its queue, its buffers, its
// Workers. A fetcher that never re-posts its slots returns no credits;
// the holder's workers then stall and, after FinTimeout, fail the pair
// and release every pin.
//
// # Faults
//
//   - A holder killed, partitioned away or whose device closes: while
//     transfers are in progress each side READs the peer's probe region
//     when the peer has been silent for ProbeInterval, and any failed
//     work request (probe, SEND, READ) fails the pair; every transfer on
//     it ends with an error wrapping object.ErrUnavailable, the objects it
//     created are aborted (nothing half-written becomes visible), READ
//     regions are deregistered after the device let go of them, and the
//     pair leaves the cache: the next fetch dials a new one. Fetch then
//     tries the next peer.
//   - A context cancelled at any point: the fetch returns its error; a
//     READ in flight is waited for before its region goes, the created
//     object is aborted, and the holder is released by FIN {aborted} (or
//     by the rest of the chunks arriving and being dropped). The pair
//     stays usable.
//   - A holder waiting longer than FinTimeout for credits or a FIN fails
//     the pair: no pin outlives it.
//   - A Sink error on Create: object.ErrExists counts as success (the
//     object is there), others (object.ErrStoreFull) are returned; the
//     transfer's remaining bytes are dropped.
//
// The fetcher calls Sink.Create on the pair's poller, as soon as DATA
// arrives (so creating overlaps the network, as in the thesis): it must
// not block for long.
//
// Concurrent fetches of one ID, in one Fetch call or several, create it
// once: the first runs the transfer, the others wait for its result (and
// run their own if it was only the first caller's context that ended).
//
// # Bytes copied in user space
//
// Stats.CopiedBytes counts the copies this package makes: object → send
// buffer at the holder (Server.Stats) and receive slot → object at the
// fetcher (Fetcher.Stats), one each per SEND/RECV byte, none for READ or
// the TCP baselines. The software NIC moves bytes too, and those copies
// are not counted: on the loop transport a SEND or READ is one memory
// copy between the two regions (the "DMA"); on the tcp transport the
// holder's soft NIC writes the region's bytes into the response frame and
// the fetcher's NIC copies the frame's payload into the READ destination
// (nic's requester_link.go, land) — user-space copies, but the
// transport's, as a kernel's socket copies are for TCP4K and TCPBulk.
//
// # Files
//
//	protocol.go   Protocol, ParseProtocol, the hybrid's rule (choose)
//	config.go     Config and its defaults
//	msg.go        the message formats, encode and decode
//	pair.go       a pair: buffers, credits, poller, prober, failure
//	fetchpair.go  the fetcher's side of a pair: transfers by id, READ
//	holdpair.go   the holder's side of a pair: request queue, workers, FIN
//	fetcher.go    Fetcher: pairs by peer, singleflight, peers in order
//	server.go     Server: cm listener, TCP listener
//	tcp.go        the TCP baselines, both sides
//	arena.go      objects inside a pre-registered arena (Config.Arena)
//	stats.go      Stats
//	tune.go       Tune: the crossover threshold, measured
package transfer

package sock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// A hostile peer writes what it likes into the windows it was given. These
// tests play one: on an established link they drive the dialer's own
// partition QP and control QP by hand, writing into the listener's window
// records and words no honest sender writes. The listener's link to that
// peer must fail (or, where the design says so, only the connection be
// reset or the record dropped), nothing may panic, and another dialer's
// link to the same listener must keep working.

// hostile drives the TX side of a dialer's connection by hand.
type hostile struct {
	t testing.TB
	c *Conn // the dialer's connection whose link and partition it uses
}

func (h hostile) part() *partition { return h.c.part }

// lock takes the partition's TX side, as a Write does.
func (h hostile) lock() *partition {
	h.t.Helper()
	p := h.part()
	if !p.lock(nil, nil) {
		h.t.Fatal("hostile: the link failed before the attack")
	}
	return p
}

// record sends a record with header hd and payload through the
// partition's QP (payload first, header last, as post does), then rings
// the peer's doorbell so that its link polls the ring even if nobody reads.
func (h hostile) record(hd header, payload []byte) {
	h.t.Helper()
	p := h.lock()
	pad, err := p.waitRoom(recordSize(hd.n), nil, nil)
	if err == nil {
		err = p.post(hd, pad, payload, nil)
	}
	p.unlock()
	if err != nil {
		h.t.Fatalf("hostile: post %v record: %v (link: %v)", hd.kind, err, p.l.failed())
	}
	p.l.ctrl.ring(true)
}

// head is the ring position (mod the ring size) at which the peer reads
// the next record header.
func (h hostile) head() int {
	p := h.lock()
	defer p.unlock()
	return int(p.write % uint64(p.l.rlay.ringSize))
}

// wordAtHead writes w where the peer reads its next record header, through
// the partition's QP, and rings the doorbell.
func (h hostile) wordAtHead(w uint64) {
	h.t.Helper()
	p := h.lock()
	off := p.l.rlay.ringOff(p.idx) + int(p.write%uint64(p.l.rlay.ringSize))
	store64(p.l.stage.Bytes(), off, w)
	p.wrs[0] = p.wordWR(off, 0)
	err := p.postWRs(1)
	p.unlock()
	if err != nil {
		h.t.Fatalf("hostile: write header word: %v", err)
	}
	p.l.ctrl.ring(true)
}

// ctrlWord writes w at offset off of the peer's window through the control
// QP, and rings the doorbell.
func (h hostile) ctrlWord(off int, w uint64) {
	h.t.Helper()
	c := h.c.l.ctrl
	c.mu.Lock()
	err := c.writeWord(off, w, true)
	c.mu.Unlock()
	if err != nil {
		h.t.Fatalf("hostile: control write: %v", err)
	}
	c.ring(true)
}

// staleID names no live connection at the peer: the slot of the attacked
// connection with an earlier generation.
func (h hostile) staleID() connID {
	return connID{slot: h.c.peer.slot, gen: (h.c.peer.gen - 1) & hdrGenMask}
}

// advanceTo moves the ring's write position to pos with records the peer
// drops (addressed to a stale generation), as an honest sender's traffic
// to a closed connection would.
func (h hostile) advanceTo(pos int) {
	h.t.Helper()
	mtu := h.c.l.mtu
	for i := 0; h.head() != pos; i++ {
		if i > 64 {
			h.t.Fatalf("hostile: cannot reach ring position %d (at %d)", pos, h.head())
		}
		gap := (pos - h.head() + h.c.l.rlay.ringSize) % h.c.l.rlay.ringSize
		n := min(gap-hdrSize, mtu) &^ 7
		if n <= 0 {
			h.record(header{kind: kindFin, id: h.staleID()}, nil)
			continue
		}
		h.record(header{n: n, kind: kindData, id: h.staleID()}, make([]byte, n))
	}
}

// hostileConfig is small enough for an attack to reach the ring's end in a
// few records.
func hostileConfig(mode Mode) Config {
	return Config{Partitions: 1, RingSize: 64 << 10, MTU: 8 << 10, ReadBuffer: 32 << 10, Mode: mode}
}

// TestHostileRingFailsLink: garbage where the listener reads its next
// record header — each fails the hostile dialer's link with ErrProtocol
// (its connections are reset), and a second dialer's link to the same
// listener keeps working, as does a new link from the hostile dialer.
func TestHostileRingFailsLink(t *testing.T) {
	valid := uint64(hdrValid)
	attacks := []struct {
		name   string
		attack func(h hostile)
	}{
		{"unknown kind", func(h hostile) {
			h.wordAtHead(valid | 7<<hdrKindShft | uint64(h.c.peer.slot)<<hdrSlotShft | uint64(h.c.peer.gen)<<hdrGenShft)
		}},
		{"reserved bits", func(h hostile) {
			h.wordAtHead(header{n: 8, kind: kindData, id: h.c.peer}.encode() | 1<<30)
		}},
		{"valid bit clear", func(h hostile) {
			h.wordAtHead(header{n: 8, kind: kindData, id: h.c.peer}.encode() &^ hdrValid)
		}},
		{"data longer than a quarter ring", func(h hostile) {
			n := h.c.l.rlay.ringSize/4 + 8
			h.record(header{n: n, kind: kindData, id: h.c.peer}, make([]byte, n))
		}},
		{"empty data record", func(h hostile) {
			h.wordAtHead(header{kind: kindData, id: h.c.peer}.encode())
		}},
		{"fin with a payload", func(h hostile) {
			h.record(header{n: 8, kind: kindFin, id: h.c.peer}, make([]byte, 8))
		}},
		{"pad at the ring's start", func(h hostile) {
			if pos := h.head(); pos != 0 {
				h.t.Fatalf("ring at %d before the attack, want 0", pos)
			}
			h.wordAtHead(header{kind: kindPad}.encode())
		}},
		{"record crossing the ring's end", func(h hostile) {
			r := h.c.l.rlay.ringSize
			h.advanceTo(r - 64)
			h.wordAtHead(header{n: 1024, kind: kindData, id: h.c.peer}.encode())
		}},
		{"garbage control-ring entry", func(h hostile) {
			c := h.c.l.ctrl
			c.mu.Lock()
			off := c.l.rlay.ctrlOff() + 8*int(c.write%ctrlEntries)
			c.mu.Unlock()
			h.ctrlWord(off, 0x0123456789abcdef&^hdrValid)
		}},
	}
	for _, tr := range transports {
		for _, mode := range []Mode{Direct, SP2C, SPSC} {
			for _, at := range attacks {
				t.Run(fmt.Sprintf("%s/%v/%s", tr, mode, at.name), func(t *testing.T) {
					rig := newFaultRig(t, hostileConfig(mode), tr)
					bad := rig.dialer()
					a, b := rig.dial(bad)
					good, goodAcc := rig.dial(rig.dialer())
					if err := roundTrip(good, goodAcc, []byte("before")); err != nil {
						t.Fatal(err)
					}
					at.attack(hostile{t: t, c: a})
					expectReset(t, b, true, "the attacked listener's connection")
					expectReset(t, a, false, "the hostile dialer's connection")
					if err := roundTrip(good, goodAcc, bytes.Repeat([]byte("after"), 5000)); err != nil {
						t.Fatalf("another dialer's link after the attack: %v", err)
					}
					a2, b2 := rig.dial(bad)
					if err := roundTrip(a2, b2, []byte("again")); err != nil {
						t.Fatalf("a new link from the hostile dialer: %v", err)
					}
				})
			}
		}
	}
}

// TestHostileStaleGeneration: records for an earlier occupant of a
// connection's slot (or a slot never used) are what an honest peer sends
// when its records cross a close; the design drops them. The connection
// reads only its own bytes, and the link goes on.
func TestHostileStaleGeneration(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			rig := newFaultRig(t, hostileConfig(Direct), tr)
			a, b := rig.dial(rig.dialer())
			h := hostile{t: t, c: a}
			h.record(header{n: 5, kind: kindData, id: h.staleID()}, []byte("STALE"))
			h.record(header{kind: kindRst, id: h.staleID()}, nil)
			h.record(header{n: 5, kind: kindData, id: connID{slot: 4000, gen: 1}}, []byte("NOONE"))
			if err := roundTrip(a, b, []byte("fresh")); err != nil {
				t.Fatalf("after records for a stale generation: %v", err)
			}
			// Nothing else arrived: a short read deadline passes.
			b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if n, err := b.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Read after the round trip = %d, %v; want a deadline (stale records dropped)", n, err)
			}
			b.SetReadDeadline(time.Time{})
			if err := roundTrip(b, a, []byte("still")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHostileOverCredit: a peer that sends more than the receive window it
// was granted. The design resets that connection (both ends get ErrReset;
// the receiver first reads what fit in the window) and keeps the link: the
// peer's other connections, and other links, go on.
func TestHostileOverCredit(t *testing.T) {
	for _, tr := range transports {
		for _, mode := range []Mode{Direct, SP2C} {
			t.Run(tr+"/"+mode.String(), func(t *testing.T) {
				cfg := Config{Partitions: 1, RingSize: 64 << 10, MTU: 4 << 10, ReadBuffer: 16 << 10, Mode: mode}
				rig := newFaultRig(t, cfg, tr)
				bad := rig.dialer()
				a, b := rig.dial(bad)
				a2, b2 := rig.dial(bad) // the same link
				good, goodAcc := rig.dial(rig.dialer())
				h := hostile{t: t, c: a}
				rec := make([]byte, 4<<10)
				for i := 0; i < 5; i++ { // 20 KiB into a 16 KiB window
					h.record(header{n: len(rec), kind: kindData, id: a.peer}, rec)
				}
				// b reads nothing until the reset reached a: reading would
				// grant more credit, making the records honest.
				expectReset(t, a, false, "the hostile connection")
				n, err := readUntilErr(b)
				if !isReset(err) || errors.Is(err, ErrProtocol) {
					t.Fatalf("the over-credit connection's Read: %v, want a connection reset", err)
				}
				if n != cfg.ReadBuffer {
					t.Errorf("read %d bytes before the reset, want the window, %d", n, cfg.ReadBuffer)
				}
				if err := roundTrip(a2, b2, []byte("same link")); err != nil {
					t.Fatalf("another connection on the hostile link: %v", err)
				}
				if err := roundTrip(good, goodAcc, []byte("other link")); err != nil {
					t.Fatalf("another link: %v", err)
				}
			})
		}
	}
}

// TestHostileShadow: a peer that writes a read index for its ring beyond
// what was ever written to it (it claims to have consumed records that do
// not exist) breaks the protocol: the link to it fails with ErrProtocol
// when this side next sends, rather than this side's writers waiting
// forever for room the lie says is impossible.
func TestHostileShadow(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			rig := newFaultRig(t, hostileConfig(Direct), tr)
			a, b := rig.dial(rig.dialer())
			good, goodAcc := rig.dial(rig.dialer())
			h := hostile{t: t, c: a}
			h.ctrlWord(shadowOff(a.part.idx), 1<<40)
			b.SetWriteDeadline(time.Now().Add(faultTimeout))
			_, err := b.Write([]byte("hello"))
			if !isReset(err) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("Write after the peer lied about its read index: %v, want a reset for a protocol violation", err)
			}
			expectReset(t, a, false, "the hostile connection")
			if err := roundTrip(good, goodAcc, []byte("other link")); err != nil {
				t.Fatalf("another link: %v", err)
			}
		})
	}
}

// TestHostileControlShadow: the same lie about the control ring (the
// peer's read index of the credit entries this side sends). A Read that
// returns credit must not spin forever: the link fails with ErrProtocol.
func TestHostileControlShadow(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			cfg := hostileConfig(Direct)
			rig := newFaultRig(t, cfg, tr)
			a, b := rig.dial(rig.dialer())
			good, goodAcc := rig.dial(rig.dialer())
			h := hostile{t: t, c: a}
			h.ctrlWord(winCtrlShadow, 1<<40)
			// Enough data that reading it returns credit (a quarter window).
			go a.Write(make([]byte, cfg.ReadBuffer))
			done := make(chan error, 1)
			go func() {
				_, err := readUntilErr(b)
				done <- err
			}()
			select {
			case err := <-done:
				if !isReset(err) || !errors.Is(err, ErrProtocol) {
					t.Fatalf("Read after the peer lied about its control read index: %v, want a reset for a protocol violation", err)
				}
			case <-time.After(2 * faultTimeout):
				t.Fatal("Read hangs after the peer lied about its control read index")
			}
			if err := roundTrip(good, goodAcc, []byte("other link")); err != nil {
				t.Fatalf("another link: %v", err)
			}
		})
	}
}

// TestOverCreditIntoBlockedRead: the credit check counts the bytes already
// delivered straight into a blocked Read's buffer. (The RX poller hands
// records to a parked Read directly; a peer over its credit must be reset
// whether or not a Read happens to wait.) White-box: it plays the RX
// poller, delivering records to a connection whose Read is parked.
func TestOverCreditIntoBlockedRead(t *testing.T) {
	cfg := Config{ReadBuffer: 16 << 10, MTU: 4 << 10, RingSize: 64 << 10}
	a, b, stop := pipe(t, cfg, "shm")
	defer stop()
	defer a.Close()
	defer b.Close()
	b.rxMu.Lock()
	b.direct = make([]byte, 64<<10) // as a parked Read leaves it
	b.rxMu.Unlock()
	rec := make([]byte, 4<<10)
	for i := 0; i < 5; i++ { // 20 KiB into a 16 KiB window
		b.deliver(header{n: len(rec), kind: kindData, id: b.id}, rec)
	}
	b.rxMu.Lock()
	rst, got := b.rstRecv, b.directN
	b.direct, b.directN = nil, 0
	b.rxMu.Unlock()
	if !rst {
		t.Fatalf("%d bytes delivered into a 16 KiB window without a reset", got)
	}
	if got != cfg.ReadBuffer {
		t.Errorf("%d bytes delivered before the reset, want the window, %d", got, cfg.ReadBuffer)
	}
	expectReset(t, a, false, "the sender over its credit")
}

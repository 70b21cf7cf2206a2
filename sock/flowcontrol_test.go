package sock

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// unread is the bytes that arrived for c and that its application has not
// read.
func unread(c *Conn) int {
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	return c.rxq.len() + c.directN
}

// TestNeverReadingPeer: a writer whose peer never reads stops after the
// receive window (Config.ReadBuffer; plus, in SP2C and SPSC, its own send
// queue, Config.WriteBuffer) — flow control stops it, nothing is dropped —
// and a write deadline then ends its Write with os.ErrDeadlineExceeded.
// Meanwhile another connection in the same partition keeps its round trips
// flowing. Once the peer reads, every byte arrives, in order.
func TestNeverReadingPeer(t *testing.T) {
	for _, tr := range transports {
		for _, mode := range []Mode{Direct, SP2C, SPSC} {
			t.Run(tr+"/"+mode.String(), func(t *testing.T) {
				cfg := Config{Partitions: 1, ReadBuffer: 256 << 10, WriteBuffer: 128 << 10, Mode: mode}
				window := cfg.ReadBuffer
				bound := window // what may be written before Write blocks
				if mode != Direct {
					bound += cfg.WriteBuffer
				}
				rig := newFaultRig(t, cfg, tr)
				d := rig.dialer()
				a, b := rig.dial(d)    // a writes; b does not read
				c, cAcc := rig.dial(d) // the same link and partition
				if a.Partition() != c.Partition() || b.Partition() != cAcc.Partition() {
					t.Fatalf("partitions %d, %d / %d, %d: want one", a.Partition(), c.Partition(), b.Partition(), cAcc.Partition())
				}
				msg := pattern(4<<20, 7)
				type result struct {
					n   int
					err error
				}
				wrote := make(chan result, 1)
				go func() {
					n, err := a.Write(msg)
					wrote <- result{n, err}
				}()

				// The window fills; the other connection's round trips go on.
				ping := pattern(1<<10, 8)
				stopAt := time.Now().Add(2 * faultTimeout)
				for unread(b) < window {
					if err := roundTrip(c, cAcc, ping); err != nil {
						t.Fatalf("the other connection while the window fills: %v", err)
					}
					if time.Now().After(stopAt) {
						t.Fatalf("%d bytes arrived at the peer in %v, want the window, %d", unread(b), 2*faultTimeout, window)
					}
				}
				for i := 0; i < 50; i++ {
					if err := roundTrip(c, cAcc, ping); err != nil {
						t.Fatalf("the other connection while the writer is blocked: %v", err)
					}
				}
				select {
				case r := <-wrote:
					t.Fatalf("Write to a peer that does not read returned %d, %v", r.n, r.err)
				default:
				}
				if n := unread(b); n > window {
					t.Fatalf("%d bytes arrived, over the %d-byte window", n, window)
				}

				// A write deadline ends the blocked Write.
				a.SetWriteDeadline(time.Now())
				var r result
				select {
				case r = <-wrote:
				case <-time.After(faultTimeout):
					t.Fatal("a past write deadline does not end the blocked Write")
				}
				if !errors.Is(r.err, os.ErrDeadlineExceeded) {
					t.Fatalf("blocked Write ended with %v, want os.ErrDeadlineExceeded", r.err)
				}
				if r.n < window || r.n > bound {
					t.Fatalf("Write took %d bytes before blocking, want %d to %d", r.n, window, bound)
				}
				a.SetWriteDeadline(time.Time{})

				// The peer reads: every byte arrives, in order.
				go func() {
					n, err := a.Write(msg[r.n:])
					if err == nil {
						err = a.CloseWrite()
					}
					wrote <- result{n, err}
				}()
				b.SetReadDeadline(time.Now().Add(4 * faultTimeout))
				got, err := io.ReadAll(b)
				if err != nil {
					t.Fatalf("read after %d bytes: %v", len(got), err)
				}
				if r := <-wrote; r.err != nil {
					t.Fatalf("the rest of the message: %v", r.err)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("%d bytes arrived (sha256 %x), want the %d written (sha256 %x)",
						len(got), sha256.Sum256(got), len(msg), sha256.Sum256(msg))
				}
				if err := roundTrip(c, cAcc, ping); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

package ring

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
)

// TestProcessStream has a child process produce a million messages of
// random length into a memfd ring it received over a Unix socket; the
// parent checks each message and the child's running checksum.
func TestProcessStream(t *testing.T) {
	seg := newSeg(t, streamSeg)
	cons, err := Init(seg.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ch, conn, peer := connectChild(t, "stream", seg)
	ctx, cancel := context.WithTimeout(t.Context(), childLimit)
	defer cancel()
	scratch := make([]byte, streamMaxLen)
	sum := uint64(fnvInit)
	start := time.Now()
	for i := range uint64(streamMsgs) {
		p, err := cons.Peek()
		for err == ErrEmpty {
			if err = cons.Wait(ctx, 20*time.Microsecond, peer.Alive); err == nil {
				p, err = cons.Peek()
			}
		}
		if err != nil {
			t.Fatalf("message %d: %v; child output:\n%s", i, err, ch.Output())
		}
		if !checkMsg(p, i, streamMaxLen, scratch) {
			t.Fatalf("message %d corrupted: % x", i, p)
		}
		sum = fnv1a(sum, p)
		cons.Release()
	}
	elapsed := time.Since(start)
	var msg [8]byte
	if _, err := readFull(conn, msg[:]); err != nil {
		t.Fatalf("child's checksum: %v; output:\n%s", err, ch.Output())
	}
	if got := binary.LittleEndian.Uint64(msg[:]); got != sum {
		t.Fatalf("checksum %#x, child sent %#x", sum, got)
	}
	if _, err := cons.Peek(); err != ErrEmpty {
		t.Fatalf("after the stream: %v", err)
	}
	conn.Close()
	ch.wait(t)
	t.Logf("%d messages in %v: %.1f M msg/s", streamMsgs, elapsed, streamMsgs/elapsed.Seconds()/1e6)
}

// wait waits for the child to exit and fails the test unless it exited 0.
func (c *child) wait(t *testing.T) {
	t.Helper()
	if err := c.Cmd.Wait(); err != nil {
		t.Fatalf("child: %v; output:\n%s", err, c.Output())
	}
}

// TestProcessPeerKilled parks the consumer on a ring whose producer, a
// child process, is then killed with SIGKILL: Wait must report
// ErrPeerDead promptly through the liveness callback.
func TestProcessPeerKilled(t *testing.T) {
	seg := newSeg(t, Size(4096))
	cons, err := Init(seg.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ch, _, peer := connectChild(t, "hang", seg)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range uint64(hangMsgs) {
		if err := cons.Wait(ctx, 0, peer.Alive); err != nil {
			t.Fatalf("message %d: %v; child output:\n%s", i, err, ch.Output())
		}
		p, err := cons.Peek()
		want := make([]byte, 16)
		fillMsg(want, i)
		if err != nil || !bytes.Equal(p, want) {
			t.Fatalf("message %d: %v %v", i, p, err)
		}
		cons.Release()
	}
	killed := make(chan time.Time, 1)
	time.AfterFunc(30*time.Millisecond, func() {
		// Only once the consumer is parked.
		for deadline := time.Now().Add(5 * time.Second); atomic.LoadUint32(cons.dataWait) == 0 &&
			time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		killed <- time.Now()
		_ = ch.Cmd.Process.Kill()
	})
	err = cons.Wait(ctx, 0, peer.Alive)
	done := time.Now()
	if err != ErrPeerDead {
		t.Fatalf("Wait: %v, want ErrPeerDead", err)
	}
	if d := done.Sub(<-killed); d > 100*time.Millisecond {
		t.Errorf("ErrPeerDead %v after SIGKILL, want within 100ms", d)
	} else {
		t.Logf("ErrPeerDead %v after SIGKILL", d)
	}
}

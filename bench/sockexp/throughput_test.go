package sockexp

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// sock-throughput, quick: a row per system, connections and size with a
// non-zero rate, net/tcp's ratio to itself 1, the sock systems' ratio
// notes, and no server left running.
func TestThroughputQuick(t *testing.T) {
	socks := sockNets()
	r, err := runThroughput(t.Context(), quickEnv(), netNets(), socks)
	if err != nil {
		t.Fatal(err)
	}
	noChildren(t)
	systems := 2 + len(socks)
	if want := systems * len(throughputConns) * len(throughputSizes); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d", len(r.Rows), want)
	}
	for _, row := range r.Rows {
		positive(t, r, row, "throughput", "vs_tcp")
		if col(t, r, row, "system") == tcpLabel && col(t, r, row, "vs_tcp") != 1.0 {
			t.Errorf("%v: net/tcp against itself %v", row[:4], col(t, r, row, "vs_tcp"))
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, n := range socks {
		if !strings.Contains(notes, n.label()+" ("+n.mode+"), 64 KiB writes on one connection, same run:") {
			t.Errorf("no ratio note for %s: %s", n.label(), notes)
		}
	}
}

// bulk counts what the sink acknowledged: whole batches on every
// connection, over a time at least the point's.
func TestBulkCountsBatches(t *testing.T) {
	ln := serveInProcess(t, Sink)
	const size, d = 64 << 10, 20 * time.Millisecond
	res, err := bulk(t.Context(), netNets()[0], "net+tcp://"+ln.Addr().String(), 3, size, d)
	if err != nil {
		t.Fatal(err)
	}
	if res.bytes < 3*minBatch || res.bytes%minBatch != 0 {
		t.Errorf("%d bytes: not whole batches of %d", res.bytes, minBatch)
	}
	if res.elapsed < d {
		t.Errorf("elapsed %v, less than the point's %v", res.elapsed, d)
	}
}

// A sink closes a connection whose batch header is out of bounds,
// without an ack, and goes on serving others.
func TestSinkRejectsBadHeader(t *testing.T) {
	ln := serveInProcess(t, Sink)
	for _, n := range []uint64{0, 7, MaxSinkBatch + 1, 1 << 63} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var hdr [8]byte
		binary.BigEndian.PutUint64(hdr[:], n)
		c.Write(hdr[:])
		if m, err := c.Read(hdr[:]); m != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("length %d: read %d, %v; want EOF, no ack", n, m, err)
		}
		c.Close()
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	batch := make([]byte, 100)
	binary.BigEndian.PutUint64(batch, 100)
	for range 2 {
		c.Write(batch)
		if _, err := io.ReadFull(c, batch[:1]); err != nil || batch[0] != 1 {
			t.Fatalf("good batch: ack %v, %v", batch[0], err)
		}
		binary.BigEndian.PutUint64(batch, 100)
	}
}

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

// sock-isolation, quick: a row per setup and load with ordered non-zero
// percentiles, a bulk rate on the bulk rows only, p99 against alone 1
// on the alone rows, the partitions each setup is about (checked with
// (*sock.Conn).Partition()), a note in words per loaded row, and no
// server left running.
func TestIsolationQuick(t *testing.T) {
	setups := isolationSetups()
	r, err := runIsolation(t.Context(), quickEnv(), setups)
	if err != nil {
		t.Fatal(err)
	}
	noChildren(t)
	want := 0
	for _, s := range setups {
		want += len(s.loads)
	}
	if len(r.Rows) != want {
		t.Fatalf("%d rows, want %d: %v", len(r.Rows), want, r.Rows)
	}
	notes := strings.Join(r.Notes, "\n")
	for _, row := range r.Rows {
		setup, load := col(t, r, row, "setup").(string), col(t, r, row, "load").(string)
		positive(t, r, row, "p50", "p99", "p999", "vs_alone")
		p50, _ := col(t, r, row, "p50").(float64)
		p99, _ := col(t, r, row, "p99").(float64)
		p999, _ := col(t, r, row, "p999").(float64)
		if !(p50 <= p99 && p99 <= p999) {
			t.Errorf("%s, %s: p50 %v, p99 %v, p999 %v out of order", setup, load, p50, p99, p999)
		}
		parts := col(t, r, row, "partitions").(string)
		switch {
		case load == "alone":
			if col(t, r, row, "vs_alone") != 1.0 || col(t, r, row, "bulk") != nil {
				t.Errorf("%s alone: vs_alone %v, bulk %v", setup, col(t, r, row, "vs_alone"), col(t, r, row, "bulk"))
			}
		case strings.HasPrefix(load, "bulk"):
			// A quick point is a few milliseconds: the sink may not have
			// acknowledged a whole 1 MiB batch inside it (a number, not
			// necessarily above zero).
			if g, ok := col(t, r, row, "bulk").(float64); !ok || g < 0 {
				t.Errorf("%s, %s: bulk %v", setup, load, col(t, r, row, "bulk"))
			}
			if !strings.Contains(notes, setup+": the latency flow's p99 next to "+load+" is ") {
				t.Errorf("no note for %s, %s: %s", setup, load, notes)
			}
		default:
			if load != "100 idle" || col(t, r, row, "bulk") != nil {
				t.Errorf("%s: load %q, bulk %v", setup, load, col(t, r, row, "bulk"))
			}
		}
		switch {
		case col(t, r, row, "system") == tcpLabel:
			if strings.Trim(parts, "–/") != "" {
				t.Errorf("net/tcp %s: partitions %q", load, parts)
			}
		case strings.HasPrefix(setup, "1 partition") && strings.HasPrefix(load, "bulk"):
			if parts != "0/0" {
				t.Errorf("%s, %s: partitions %q, want 0/0", setup, load, parts)
			}
		case setup == "2 partitions" && strings.HasPrefix(load, "bulk"):
			if a, b, _ := strings.Cut(parts, "/"); a == b || a == "–" || b == "–" {
				t.Errorf("%s, %s: partitions %q, want two different", setup, load, parts)
			}
		}
	}
	if !strings.Contains(notes, "both connections in partition 0") || !strings.Contains(notes, "the bulk connection in partition") {
		t.Errorf("notes do not say where the connections were: %s", notes)
	}
}

// placement refuses connections outside the partitions a setup is about.
func TestPlacementCheck(t *testing.T) {
	for _, tc := range []struct {
		p         placement
		lat, bulk int
		ok        bool
	}{
		{placeSame, 0, 0, true}, {placeSame, 0, 1, false}, {placeSame, -1, -1, false},
		{placeDifferent, 0, 1, true}, {placeDifferent, 1, 1, false}, {placeDifferent, 0, -1, false},
		{placeAny, -1, -1, true}, {placeAny, 0, 1, true},
	} {
		if err := tc.p.check(tc.lat, tc.bulk); (err == nil) != tc.ok || (err != nil && !errors.Is(err, errPlacement)) {
			t.Errorf("%d: %d, %d: %v", tc.p, tc.lat, tc.bulk, err)
		}
	}
}

// A mux server runs echo and sink on one listener, picked by each
// connection's first byte, and closes a connection whose first byte
// picks neither.
func TestMuxApp(t *testing.T) {
	ln := serveInProcess(t, Mux)
	dial := func(sel byte) net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte{sel}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	e, s := dial(MuxEcho), dial(MuxSink)
	batch := make([]byte, 100)
	binary.BigEndian.PutUint64(batch, 100)
	if _, err := s.Write(batch); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(e, got); err != nil || string(got) != "ping" {
		t.Errorf("echo: %q, %v", got, err)
	}
	if _, err := io.ReadFull(s, got[:1]); err != nil || got[0] != 1 {
		t.Errorf("sink ack: %v, %v", got[0], err)
	}
	bad := dial('x')
	if n, err := bad.Read(got); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("unknown selector: read %d, %v; want EOF", n, err)
	}
}

// The URI query sets slicing and lifts the batch limit; a bad slicing
// value is a malformed URI.
func TestSlicingQuery(t *testing.T) {
	_, _, cfg, err := sockConfig("x?slicing=0&batch=-1")
	if err != nil || !cfg.NoSlicing || cfg.BatchLimit != -1 {
		t.Errorf("slicing=0&batch=-1: %+v, %v", cfg, err)
	}
	if _, _, cfg, err := sockConfig("x?slicing=1"); err != nil || cfg.NoSlicing {
		t.Errorf("slicing=1: NoSlicing %v, %v", cfg.NoSlicing, err)
	}
	if _, _, _, err := sockConfig("x?slicing=maybe"); !errors.Is(err, ErrURI) {
		t.Errorf("slicing=maybe: %v, want ErrURI", err)
	}
}

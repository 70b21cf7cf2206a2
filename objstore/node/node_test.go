package node

import (
	"bufio"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
)

func TestAnnouncementRoundTrip(t *testing.T) {
	for _, a := range []Announcement{
		{Socket: "@s", Verbs: "127.0.0.1:1", TCP: "127.0.0.1:2", Stats: "127.0.0.1:3"},
		{Socket: "/tmp/x.sock"},
	} {
		got, err := ParseAnnouncement(a.String() + "\n")
		if err != nil || got != a {
			t.Fatalf("ParseAnnouncement(%q) = %+v, %v; want %+v", a.String(), got, err, a)
		}
	}
	if _, err := ParseAnnouncement("sockexp: listening on x"); !errors.Is(err, ErrAnnouncement) {
		t.Fatalf("a foreign line: %v, want ErrAnnouncement", err)
	}
}

// running is a node served in this process.
type running struct {
	Announcement
	cancel context.CancelFunc
	done   chan error
}

func serveNode(t *testing.T, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := Serve(ctx, pw, cfg)
		pw.CloseWithError(errors.New("node stopped"))
		r.done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no announcement: %v (%v)", err, <-r.done)
	}
	if r.Announcement, err = ParseAnnouncement(line); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Serve returned %v after its context ended", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve still runs 10 s after its context ended")
		}
	})
	return r
}

// TestFetchBetweenNodes: a fetcher node pulls a small object (SEND/RECV)
// and a large one (READ) from a holder node by the hybrid; the copies are
// byte for byte the originals, and /stats counts the copies SEND/RECV
// made in user space (both sides) and none for READ.
func TestFetchBetweenNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := serveNode(t, Config{Mem: 16 << 20, Stats: "127.0.0.1:0", Transfer: Transfer{Listen: "127.0.0.1:0"}})
	f := serveNode(t, Config{Mem: 16 << 20, Stats: "127.0.0.1:0", Transfer: Transfer{Peers: []string{h.Verbs}, Protocol: "hybrid", Threshold: 8 << 10}})
	if h.Verbs == "" || h.TCP != "" || f.Verbs != "" {
		t.Fatalf("announcements %+v, %+v", h.Announcement, f.Announcement)
	}
	hc, err := objstore.Connect(ctx, h.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	fc, err := objstore.Connect(ctx, f.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	sums := map[object.ID]uint32{}
	var ids []object.ID
	for _, size := range []int{1000, 1 << 20} {
		id := object.NewID()
		dst, err := hc.Create(ctx, id, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range dst {
			dst[i] = byte(i * 7)
		}
		sums[id] = crc32.ChecksumIEEE(dst)
		if err := hc.Seal(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := hc.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	errs, err := fc.Fetch(ctx, ids)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("Fetch: %v %v", err, errs)
	}
	bufs, err := fc.Get(ctx, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		if b == nil || crc32.ChecksumIEEE(b.Data) != sums[ids[i]] {
			t.Fatalf("object %d differs after the fetch", i)
		}
		fc.Release(ctx, ids[i])
	}
	hs, err := ReadStats(ctx, h.Stats)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := ReadStats(ctx, f.Stats)
	if err != nil {
		t.Fatal(err)
	}
	if hs.Transfer.CopiedBytes != 1000 || fs.Transfer.CopiedBytes != 1000 {
		t.Fatalf("copied in user space: holder %d, fetcher %d; want 1000 each (the small object only)",
			hs.Transfer.CopiedBytes, fs.Transfer.CopiedBytes)
	}
	if fs.Store.Sealed != 2 || hs.Store.Pins != 0 {
		t.Fatalf("fetcher holds %d sealed objects (want 2), holder %d pins (want 0)", fs.Store.Sealed, hs.Store.Pins)
	}
}

func TestTuneLocalHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Tune(ctx, TuneConfig{Sizes: []int{1 << 10, 128 << 10}, Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 2 || res.Points[0].Size != 1<<10 || res.Points[1].Size != 128<<10 {
		t.Fatalf("points %+v", res.Points)
	}
	for _, p := range res.Points {
		if p.SendRecv <= 0 || p.Read <= 0 {
			t.Fatalf("point %+v has no latency", p)
		}
	}
	if _, err := Tune(ctx, TuneConfig{Peer: "127.0.0.1:1"}); err == nil {
		t.Fatal("Tune of a given peer without its socket succeeded")
	}
}

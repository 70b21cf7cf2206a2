package objstore

import (
	"context"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestConcurrentClients runs many goroutines on a few shared clients:
// each creates, seals and publishes objects another goroutine gets,
// checks and releases, under eviction pressure; at the end nothing is
// referenced and the counts add up.
func TestConcurrentClients(t *testing.T) {
	s := newTestStore(t, 4<<20)
	clients := []*Client{connect(t, s), connect(t, s), connect(t, s)}
	ctx := context.Background()
	const workers, rounds = 16, 40
	ids := make(chan struct {
		id  ID
		sum uint32
	}, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Go(func() {
			for r := range rounds {
				id := NewID()
				size := (w*rounds + r) * 97 % (64 << 10)
				buf, err := c.Create(ctx, id, size, []byte{byte(w)})
				if errors.Is(err, ErrStoreFull) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				for i := range buf {
					buf[i] = byte(i + w)
				}
				sum := crc32.ChecksumIEEE(buf)
				if err := c.Seal(ctx, id); err != nil {
					t.Error(err)
				}
				if err := c.Release(ctx, id); err != nil {
					t.Error(err)
				}
				ids <- struct {
					id  ID
					sum uint32
				}{id, sum}
			}
		})
		reader := clients[(w+1)%len(clients)]
		wg.Go(func() {
			for range rounds {
				var o struct {
					id  ID
					sum uint32
				}
				select {
				case o = <-ids:
				case <-time.After(10 * time.Second):
					return
				}
				got, err := reader.Get(ctx, []ID{o.id}, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if got[0] == nil {
					continue // evicted meanwhile
				}
				if crc32.ChecksumIEEE(got[0].Data) != o.sum {
					t.Errorf("object %s: checksum mismatch", o.id)
				}
				if err := reader.Release(ctx, o.id); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.References != 0 || st.Unsealed != 0 || st.Evictable != st.Objects || st.BytesAllocated+st.BytesFree != st.ArenaBytes {
		t.Fatalf("stats after the run: %+v", st)
	}
}

// TestGetReplyAllocs checks that the store's Get handling (finding the
// objects, taking references, encoding the reply into a reused buffer)
// allocates nothing.
func TestGetReplyAllocs(t *testing.T) {
	s := newTestStore(t, 1<<20)
	c := connect(t, s)
	ids := []ID{NewID(), NewID()}
	for _, id := range ids {
		put(t, c, id, 1000, nil, 1)
	}
	sess := newSession(s, 99, nil)
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(1000, func() {
		s.mu.Lock()
		buf, _ = s.get(sess, 1, ids, 0, buf)
		for _, id := range ids {
			if err := s.release(sess, id); err != nil {
				t.Fatal(err)
			}
		}
		s.mu.Unlock()
	})
	if allocs != 0 {
		t.Fatalf("Get handling allocates %v times", allocs)
	}
}

// TestTryWriteAllocs: a reply that leaves by send's non-blocking write
// allocates nothing there.
func TestTryWriteAllocs(t *testing.T) {
	s := newTestStore(t, 1<<20)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := net.FileConn(os.NewFile(uintptr(fds[0]), "store side"))
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	peer := os.NewFile(uintptr(fds[1]), "client side")
	defer peer.Close()
	sess := newSession(s, 99, mine.(*net.UnixConn))
	frame, got := make([]byte, 64), make([]byte, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		if n := sess.tryWrite(frame); n != len(frame) {
			t.Fatalf("tryWrite wrote %d of %d bytes", n, len(frame))
		}
		if _, err := io.ReadFull(peer, got); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("tryWrite allocates %v times", allocs)
	}
}

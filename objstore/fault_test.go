package objstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

const holderRole = "objstore-holder"

func init() { remotedev.Role(holderRole, runHolder) }

// runHolder is a child that connects to the store at arg's socket, takes
// a reference to arg's sealed object, creates a 4 MiB object it never
// seals, says "ready" and waits to be killed.
func runHolder(arg string) int {
	socket, idHex, _ := strings.Cut(arg, ",")
	id, err := ParseID(idHex)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ctx := context.Background()
	c, err := Connect(ctx, socket)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if got, err := c.Get(ctx, []ID{id, id}, time.Second); err != nil || got[0] == nil {
		fmt.Println("get:", got, err)
		return 1
	}
	buf, err := c.Create(ctx, NewID(), 4<<20, []byte("half"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	fmt.Println("ready")
	select {}
}

// sameCounts waits until s's object, reference and allocation counts are
// back to want's.
func sameCounts(t *testing.T, s *Store, want Stats) {
	t.Helper()
	var st Stats
	deadline := time.Now().Add(10 * time.Second)
	for {
		st = s.Stats()
		if st.Objects == want.Objects && st.References == want.References && st.BytesAllocated == want.BytesAllocated && st.Clients == want.Clients && st.Waiters == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want objects %d, references %d, %d bytes allocated, %d clients, no waiter",
				st, want.Objects, want.References, want.BytesAllocated, want.Clients)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDepartedClientCleanedUp closes a client holding references, an
// unsealed object and a blocked Get: the store gives everything back.
func TestDepartedClientCleanedUp(t *testing.T) {
	s := newTestStore(t, 16<<20)
	owner := connect(t, s)
	id := NewID()
	put(t, owner, id, 1<<20, nil, 1)
	before := s.Stats()

	c := connect(t, s)
	ctx := context.Background()
	if _, err := c.Get(ctx, []ID{id, id}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, NewID(), 2<<20, nil); err != nil {
		t.Fatal(err)
	}
	go c.Get(ctx, []ID{NewID()}, -1)
	waitFor(t, "the Get to wait", func() bool { return s.Stats().Waiters == 1 })
	if st := s.Stats(); st.References != 3 || st.Unsealed != 1 {
		t.Fatalf("stats with the client connected: %+v", st)
	}
	c.Close()
	sameCounts(t, s, before)
	if err := owner.Delete(ctx, id); err != nil {
		t.Fatalf("Delete after the reader left: %v", err)
	}
}

// TestKilledClientCleanedUp kills -9 a child process holding references
// and an unsealed object.
func TestKilledClientCleanedUp(t *testing.T) {
	s := newTestStore(t, 32<<20)
	owner := connect(t, s)
	id := NewID()
	put(t, owner, id, 1<<20, nil, 1)
	before := s.Stats()

	child := remotedev.StartCaptured(t, holderRole, s.Addr()+","+id.String())
	waitFor(t, "the child to be ready", func() bool { return strings.Contains(child.Output(), "ready") })
	if st := s.Stats(); st.References != 3 || st.Unsealed != 1 || st.Clients != 2 {
		t.Fatalf("stats with the child connected: %+v (child says %q)", st, child.Output())
	}
	residentHeld := s.Stats().ResidentBytes
	if err := child.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Cmd.Wait()
	sameCounts(t, s, before)
	if r := s.Stats().ResidentBytes; r > residentHeld-3<<20 {
		t.Fatalf("resident %d after the child's 4 MiB were aborted, %d before", r, residentHeld)
	}
}

// TestCancelledGet cancels blocked Gets: each returns the context's
// error and leaves no waiter; Gets cancelled while objects are being
// sealed leave no reference behind either.
func TestCancelledGet(t *testing.T) {
	s := newTestStore(t, 16<<20)
	c := connect(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, []ID{NewID()}, -1)
		errc <- err
	}()
	waitFor(t, "the Get to wait", func() bool { return s.Stats().Waiters == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Get: %v, want context.Canceled", err)
	}
	waitFor(t, "the waiter to go", func() bool { return s.Stats().Waiters == 0 })

	// Races between cancellation and sealing.
	writer := connect(t, s)
	var wg sync.WaitGroup
	for i := range 200 {
		id := NewID()
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*100*time.Microsecond)
			defer cancel()
			got, err := c.Get(ctx, []ID{id}, -1)
			if err == nil && got[0] != nil {
				c.Release(context.Background(), id)
			}
		})
		put(t, writer, id, 10, nil, 0)
	}
	wg.Wait()
	waitFor(t, "every reference and waiter to go", func() bool {
		st := s.Stats()
		return st.References == 0 && st.Waiters == 0
	})
}

// TestStoreRestart stops the store under a client: calls fail with
// ErrDisconnected; a store started on the same socket takes new clients.
func TestStoreRestart(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "store.sock")
	s, err := NewStore(Config{Mem: 1 << 20, Socket: socket, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background())
	c := connect(t, s)
	ctx := context.Background()
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, []ID{NewID()}, -1)
		blocked <- err
	}()
	waitFor(t, "the Get to wait", func() bool { return s.Stats().Waiters == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; !errors.Is(err, ErrDisconnected) {
		t.Fatalf("blocked Get when the store stopped: %v, want ErrDisconnected", err)
	}
	if _, err := c.Contains(ctx, NewID()); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("call after the store stopped: %v, want ErrDisconnected", err)
	}
	if _, err := c.Create(ctx, NewID(), 1, nil); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("Create after the store stopped: %v, want ErrDisconnected", err)
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Fatalf("socket file left after Close: %v", err)
	}
	s2, err := NewStore(Config{Mem: 1 << 20, Socket: socket, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go s2.Serve(context.Background())
	defer s2.Close()
	c2 := connect(t, s2)
	put(t, c2, NewID(), 100, nil, 1)
	if err := c.Close(); err != nil {
		t.Fatalf("Close of a disconnected client: %v", err)
	}
	if _, err := c.Contains(ctx, NewID()); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrDisconnected) {
		t.Fatalf("call after Close: %v", err)
	}
}

// rawConn connects to s without a Client and reads its hello.
func rawConn(t *testing.T, s *Store) *net.UnixConn {
	t.Helper()
	nc, err := net.Dial("unix", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	conn := nc.(*net.UnixConn)
	if _, _, _, err := readFrame(bufio.NewReaderSize(conn, 16), nil, 64); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestFloodingClient writes requests without reading replies: the store
// stops reading it once MaxOutstanding replies wait, and keeps serving
// others.
func TestFloodingClient(t *testing.T) {
	s := newTestStore(t, 1<<20)
	conn := rawConn(t, s)
	go func() {
		var buf []byte
		for i := uint32(1); ; i++ {
			buf = encodeRequest(buf, &request{typ: msgList, reqID: i})
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	// Fill the socket buffers in both directions, then check the bound.
	waitFor(t, "the flood to back up", func() bool { return s.Stats().PendingReplies == DefaultMaxOutstanding })
	time.Sleep(50 * time.Millisecond)
	if st := s.Stats(); st.PendingReplies > DefaultMaxOutstanding {
		t.Fatalf("%d replies pending, over the limit of %d", st.PendingReplies, DefaultMaxOutstanding)
	}
	c := connect(t, s)
	put(t, c, NewID(), 10, nil, 1)
	conn.Close()
	waitFor(t, "the flooder to go", func() bool { return s.Stats().Clients == 1 })
}

// TestHostileFrames sends malformed frames: each closes its own
// connection only.
func TestHostileFrames(t *testing.T) {
	s := newTestStore(t, 1<<20)
	good := connect(t, s)
	frames := map[string][]byte{
		"huge length":  {msgCreate, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff},
		"unknown type": {0x77, 1, 0, 0, 0, 0, 0, 0, 0},
		"short id":     {msgSeal, 1, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3},
		"count lies":   {msgGet, 1, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0},
		"reply type":   {msgSeal | replyBit, 1, 0, 0, 0, 0, 0, 0, 0},
	}
	for name, f := range frames {
		conn := rawConn(t, s)
		if _, err := conn.Write(f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := conn.Read(make([]byte, 64)); err == nil {
			t.Fatalf("%s: the store answered %d bytes instead of closing", name, n)
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: the store kept the connection open", name)
		}
	}
	put(t, good, NewID(), 10, nil, 1)
	waitFor(t, "the hostile clients to go", func() bool { return s.Stats().Clients == 1 })
}

// TestStaleSocket starts a store on the socket file a dead store left:
// it is taken over; a live store's socket is not.
func TestStaleSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "store.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, as after kill -9
	s, err := NewStore(Config{Mem: 1 << 20, Socket: socket, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("NewStore on a stale socket: %v", err)
	}
	go s.Serve(context.Background())
	defer s.Close()
	if _, err := NewStore(Config{Mem: 1 << 20, Socket: socket, Logger: testLogger(t)}); err == nil {
		t.Fatal("a second store took a live store's socket")
	}
	put(t, connect(t, s), NewID(), 1, nil, 1)
}

// TestCancelledCallsGiveBack cancels Creates and Gets before their
// replies come: what the store granted them is given back.
func TestCancelledCallsGiveBack(t *testing.T) {
	s := newTestStore(t, 16<<20)
	c := connect(t, s)
	id := NewID()
	put(t, c, id, 100, nil, 1)
	before := s.Stats()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		newID := NewID()
		if _, err := c.Create(cancelled, newID, 1000, nil); err == nil {
			// The reply won the race: this caller owns the object.
			c.Abort(context.Background(), newID)
		} else if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if got, err := c.Get(cancelled, []ID{id}, 0); err == nil && got[0] != nil {
			c.Release(context.Background(), id)
		} else if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	sameCounts(t, s, before)
}

// TestWaiterLimit blocks more Gets than a client may: the extra one fails
// with ErrBusy, and the others still complete.
func TestWaiterLimit(t *testing.T) {
	s, err := NewStore(Config{Mem: 1 << 20, MaxOutstanding: 8, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background())
	defer s.Close()
	c, w := connect(t, s), connect(t, s)
	ctx := context.Background()
	id := NewID()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := c.Get(ctx, []ID{id}, -1)
			if err != nil || got[0] == nil {
				t.Errorf("blocked Get: %v %v", got, err)
			}
		})
	}
	waitFor(t, "4 Gets to wait", func() bool { return s.Stats().Waiters == 4 })
	if _, err := c.Get(ctx, []ID{id}, -1); !errors.Is(err, ErrBusy) {
		t.Fatalf("a fifth blocked Get: %v, want ErrBusy", err)
	}
	put(t, w, id, 1, nil, 1)
	wg.Wait()
}

const storeRole = "objstore-store"

func init() { remotedev.Role(storeRole, runStore) }

// runStore is a child serving a store on arg's socket until killed.
func runStore(arg string) int {
	s, err := NewStore(Config{Mem: 8 << 20, Socket: arg})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("serving")
	if err := s.Serve(context.Background()); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// TestKilledStore kills -9 a store process under a client: every call,
// blocked or new, fails with ErrDisconnected, the views the client holds
// stay readable, and a store restarted on the socket takes new clients.
func TestKilledStore(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "store.sock")
	child := remotedev.StartCaptured(t, storeRole, socket)
	waitFor(t, "the store to serve", func() bool { return strings.Contains(child.Output(), "serving") })
	c := connectTo(t, socket)
	ctx := context.Background()
	id := NewID()
	put(t, c, id, 5000, nil, 9)
	got, err := c.Get(ctx, []ID{id}, 0)
	if err != nil || got[0] == nil {
		t.Fatal(got, err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, []ID{NewID()}, -1)
		blocked <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := child.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Cmd.Wait()
	if err := <-blocked; !errors.Is(err, ErrDisconnected) {
		t.Fatalf("blocked Get when the store died: %v, want ErrDisconnected", err)
	}
	if _, err := c.Contains(ctx, id); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("call after the store died: %v, want ErrDisconnected", err)
	}
	last := 4999
	if got[0].Data[last] != byte(last*7)+9 {
		t.Fatal("a view changed after the store died")
	}
	restarted := remotedev.StartCaptured(t, storeRole, socket)
	waitFor(t, "the restarted store to serve", func() bool { return strings.Contains(restarted.Output(), "serving") })
	c2 := connectTo(t, socket)
	if has, err := c2.Contains(ctx, id); err != nil || has {
		t.Fatalf("the restarted store: Contains %v %v, want an empty store", has, err)
	}
}

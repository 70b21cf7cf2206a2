package prism_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/prism"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	_ "github.com/rdmakit/rdmakit/transport/shm"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

var fabricSeq atomic.Int64

// conn is a client QP connected to a fresh server QP of the server device.
type conn struct {
	cq  verbs.CQ
	qp  verbs.QP
	buf verbs.MR
	wrs []verbs.SendWR
	wc  []verbs.WC
}

type testbed struct {
	server verbs.Device
	spd    verbs.PD
	scq    verbs.CQ
	pool   verbs.MR
	fabric string
	scheme string
}

// uri names device name of the testbed's transport.
func (tb *testbed) uri(name string) string {
	switch tb.scheme {
	case "shm":
		return fmt.Sprintf("shm://%s-%d-%s", tb.fabric, os.Getpid(), name)
	case "tcp":
		return "tcp://127.0.0.1:0"
	}
	return "loop://" + tb.fabric + "/" + name
}

func newTestbed(t testing.TB, poolSize int) *testbed { return newTestbedOn(t, "loop", poolSize) }

func newTestbedOn(t testing.TB, scheme string, poolSize int) *testbed {
	t.Helper()
	tb := &testbed{fabric: fmt.Sprintf("prism%d", fabricSeq.Add(1)), scheme: scheme}
	srv, err := verbs.Open(tb.uri("server"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	pd, _ := srv.AllocPD()
	cq, _ := srv.CreateCQ(1024)
	mr, err := pd.AllocMR(poolSize, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	tb.server, tb.spd, tb.scq, tb.pool = srv, pd, cq, mr
	return tb
}

func (tb *testbed) connect(t testing.TB, name string) *conn {
	t.Helper()
	dev, err := verbs.Open(tb.uri(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(1024)
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	sq, err := tb.spd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: tb.scq, RecvCQ: tb.scq})
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qp, verbs.AccessAll, tb.server.Address(), sq.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(sq, verbs.AccessAll, dev.Address(), qp.QPN()); err != nil {
		t.Fatal(err)
	}
	buf, _ := pd.AllocMR(4096, verbs.AccessAll)
	return &conn{cq: cq, qp: qp, buf: buf, wrs: make([]verbs.SendWR, 8), wc: make([]verbs.WC, 8)}
}

func (c *conn) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: c.buf.Addr() + uint64(off), Length: uint32(n), LKey: c.buf.LKey()}
}

// run posts wrs and returns the first completion.
func (c *conn) run(t testing.TB, wrs []verbs.SendWR) verbs.WC {
	if err := c.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := verbs.PollWait(ctx, c.cq, c.wc[:1], verbs.PollAdaptive)
	if err != nil || n != 1 {
		t.Fatalf("poll: %d %v", n, err)
	}
	return c.wc[0]
}

func TestPoolAllocateAndRecycle(t *testing.T) {
	tb := newTestbed(t, 1<<20)
	pool, err := prism.NewPool(tb.pool, prism.PoolConfig{MinSize: 64, MaxSize: 4096, Stock: 4})
	if err != nil {
		t.Fatal(err)
	}
	q, size, ok := pool.Class(100)
	if !ok || size != 128 || q != 1 {
		t.Fatalf("Class(100) = %d, %d, %v; want 1, 128, true", q, size, ok)
	}
	if _, _, ok := pool.Class(5000); ok {
		t.Error("Class(5000) fits a pool whose largest class is 4096")
	}
	c := tb.connect(t, "c")
	fl := tb.pool.(verbs.FreeLists)
	var got []uint64
	for i := 0; i < 4; i++ {
		wr := verbs.SendWR{ID: 1, Opcode: verbs.OpAllocate, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{c.sge(0, 100)}, RKey: tb.pool.RKey(), Queue: q}
		wc := c.run(t, []verbs.SendWR{wr})
		if wc.Status != verbs.StatusSuccess || (wc.Result-tb.pool.Addr())%128 != 0 {
			t.Fatalf("ALLOCATE %d: %v at %#x", i, wc.Status, wc.Result)
		}
		got = append(got, wc.Result)
	}
	if fl.FreeLen(q) != 0 {
		t.Fatalf("free list holds %d after taking the stock", fl.FreeLen(q))
	}
	if err := pool.Free(q, got[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := pool.Free(q, tb.pool.Addr()+64); err == nil {
		t.Error("Free of a misaligned buffer succeeded")
	}
	if n, err := pool.Reclaim(); n != 2 || err != nil {
		t.Fatalf("Reclaim = %d, %v", n, err)
	}
	if fl.FreeLen(q) != 4 { // the two returned plus two fresh to restock
		t.Errorf("free list holds %d after Reclaim, want 4", fl.FreeLen(q))
	}
	if s := pool.Stats(); s.Returned != 2 || s.Recycled != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestClientHelpers(t *testing.T) {
	tb := newTestbed(t, 1<<20)
	pool, err := prism.NewPool(tb.pool, prism.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := tb.connect(t, "c")
	mem := tb.pool.Bytes()
	// A slot near the end of the region points to a first item.
	slotOff := tb.pool.Len() - 64
	slot := tb.pool.Addr() + uint64(slotOff)
	first := tb.pool.Addr() + uint64(slotOff) - 64
	copy(mem[slotOff-64:], "first item")
	binary.NativeEndian.PutUint64(mem[slotOff:], first)

	wc := c.run(t, prism.IndirectRead(c.wrs, 1, c.sge(0, 10), tb.pool.RKey(), slot, false))
	if wc.Status != verbs.StatusSuccess || string(c.buf.Bytes()[:10]) != "first item" {
		t.Fatalf("IndirectRead: %v %q", wc.Status, c.buf.Bytes()[:10])
	}
	q, _, _ := pool.Class(64)
	copy(c.buf.Bytes()[100:], "second item")
	wc = c.run(t, prism.AllocWriteInstall(c.wrs, 2, c.sge(100, 11), tb.pool.RKey(), q, slot, first, c.sge(200, 8), 0))
	if wc.Status != verbs.StatusSuccess || binary.NativeEndian.Uint64(c.buf.Bytes()[200:]) != first {
		t.Fatalf("AllocWriteInstall: %v, previous %#x", wc.Status, binary.NativeEndian.Uint64(c.buf.Bytes()[200:]))
	}
	c.run(t, prism.IndirectRead(c.wrs, 3, c.sge(0, 11), tb.pool.RKey(), slot, false))
	if string(c.buf.Bytes()[:11]) != "second item" {
		t.Fatalf("after the install the slot reads %q", c.buf.Bytes()[:11])
	}
	// CASIfGreater on a 16-byte ⟨tag, value⟩ compared by tag only.
	tagOff := slotOff - 256
	binary.NativeEndian.PutUint64(mem[tagOff:], 5)
	for _, tc := range []struct{ tag, want uint64 }{{3, 5}, {9, 9}, {9, 9}} {
		wc = c.run(t, prism.CASIfGreater(c.wrs, 4, c.sge(300, 16), tb.pool.RKey(), tb.pool.Addr()+uint64(tagOff), 16,
			[4]uint64{tc.tag, 77}, [4]uint64{^uint64(0)}))
		if wc.Status != verbs.StatusSuccess || binary.NativeEndian.Uint64(mem[tagOff:]) != tc.want {
			t.Fatalf("CASIfGreater(%d): %v, tag now %d", tc.tag, wc.Status, binary.NativeEndian.Uint64(mem[tagOff:]))
		}
	}
}

func TestReturnRing(t *testing.T) {
	tb := newTestbed(t, 1<<20)
	pool, err := prism.NewPool(tb.pool, prism.PoolConfig{MinSize: 64, MaxSize: 64, Stock: 8})
	if err != nil {
		t.Fatal(err)
	}
	ringOff := tb.pool.Len() - prism.ReturnRingSize(4)
	ring, err := prism.NewReturnRing(tb.pool, ringOff, 4)
	if err != nil {
		t.Fatal(err)
	}
	c := tb.connect(t, "c")
	rets := []prism.Returned{{Addr: tb.pool.Addr(), Class: 0}, {Addr: tb.pool.Addr() + 64, Class: 0}, {Addr: tb.pool.Addr() + 128, Class: 0}}
	wc := c.run(t, prism.ReturnWRs(c.wrs, 1, tb.pool.RKey(), ring.Addr(), len(rets), c.sge(0, 8)))
	first := binary.NativeEndian.Uint64(c.buf.Bytes())
	if wc.Status != verbs.StatusSuccess || first != 0 {
		t.Fatalf("reserve: %v, first %d", wc.Status, first)
	}
	wc = c.run(t, prism.FillWRs(c.wrs, 2, tb.pool.RKey(), ring.Addr(), ring.Slots(), first, rets, c.sge(64, 24)))
	if wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	for i := 0; i < len(rets); i++ {
		if v := binary.NativeEndian.Uint64(c.buf.Bytes()[64+8*i:]); v != 0 {
			t.Errorf("slot %d was occupied (%#x)", i, v)
		}
	}
	if n, err := ring.Drain(pool); n != 3 || err != nil {
		t.Fatalf("Drain = %d, %v", n, err)
	}
	if n, err := ring.Drain(pool); n != 0 || err != nil {
		t.Fatalf("second Drain = %d, %v", n, err)
	}
	if n, _ := pool.Reclaim(); n != 3 {
		t.Errorf("Reclaim recycled %d, want 3", n)
	}
}

// TestRecyclingTorture races readers following a slot with a writer that
// replaces the slot's item (ALLOCATE + conditional CAS) and frees the old
// one, which the pool recycles into the next items. Every item carries a
// checksum of its contents: a reader that ever copied a buffer being
// rewritten by its next life would see a bad checksum. At least a million
// operations run.
func TestRecyclingTorture(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		ops    int
	}{{"loop", 1_000_000}, {"shm", 1_000_000}, {"tcp", 20_000}} {
		t.Run(tc.scheme, func(t *testing.T) {
			total := tc.ops
			if testing.Short() {
				total /= 10
			}
			torture(t, tc.scheme, total)
		})
	}
}

func torture(t *testing.T, scheme string, total int) {
	const itemLen = 64
	tb := newTestbedOn(t, scheme, 1<<20)
	pool, err := prism.NewPool(tb.pool, prism.PoolConfig{MinSize: 64, MaxSize: 64, Stock: 32})
	if err != nil {
		t.Fatal(err)
	}
	table := crc64.MakeTable(crc64.ECMA)
	fillItem := func(b []byte, gen uint64) {
		binary.NativeEndian.PutUint64(b, gen)
		for i := 8; i < itemLen-8; i++ {
			b[i] = byte(gen*31 + uint64(i))
		}
		binary.NativeEndian.PutUint64(b[itemLen-8:], crc64.Checksum(b[:itemLen-8], table))
	}
	valid := func(b []byte) bool {
		return binary.NativeEndian.Uint64(b[itemLen-8:]) == crc64.Checksum(b[:itemLen-8], table)
	}
	// Items and the slot must share an rkey: the slot sits at the end of
	// the pool's region, beyond what the pool carves for its small stock.
	slotOff := tb.pool.Len() - 64
	slot := tb.pool.Addr() + uint64(slotOff)
	q, _, _ := pool.Class(itemLen)
	w := tb.connect(t, "writer")
	fillItem(w.buf.Bytes(), 0)
	wr := verbs.SendWR{ID: 1, Opcode: verbs.OpAllocate, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{w.sge(0, itemLen)}, RKey: tb.pool.RKey(), Queue: q}
	wc := w.run(t, []verbs.SendWR{wr})
	if wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	cur := wc.Result
	binary.NativeEndian.PutUint64(tb.pool.Bytes()[slotOff:], cur)

	var reads, writes, bad atomic.Int64
	var done atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rc := tb.connect(t, fmt.Sprintf("reader%d", r))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				wc := rc.run(t, prism.IndirectRead(rc.wrs, 2, rc.sge(0, itemLen), tb.pool.RKey(), slot, false))
				if wc.Status != verbs.StatusSuccess || !valid(rc.buf.Bytes()[:itemLen]) {
					bad.Add(1)
				}
				if reads.Add(1)+writes.Load() >= int64(total) {
					done.Store(true)
				}
			}
		}()
	}
	for gen := uint64(1); !done.Load(); gen++ {
		fillItem(w.buf.Bytes(), gen)
		wc := w.run(t, prism.AllocWriteInstall(w.wrs, 3, w.sge(0, itemLen), tb.pool.RKey(), q, slot, cur, w.sge(128, 8), 0))
		if wc.Status != verbs.StatusSuccess || binary.NativeEndian.Uint64(w.buf.Bytes()[128:]) != cur {
			t.Fatalf("install %d: %v, slot held %#x not %#x", gen, wc.Status, binary.NativeEndian.Uint64(w.buf.Bytes()[128:]), cur)
		}
		old := cur
		cur = binary.NativeEndian.Uint64(tb.pool.Bytes()[slotOff:])
		if err := pool.Free(q, old); err != nil {
			t.Fatal(err)
		}
		if gen%8 == 0 {
			if _, err := pool.Reclaim(); err != nil {
				t.Fatal(err)
			}
		}
		writes.Add(1)
	}
	wg.Wait()
	s := pool.Stats()
	t.Logf("%d reads, %d replace-and-free, %d buffers recycled, %d carved", reads.Load(), writes.Load(), s.Recycled, s.Carved)
	if bad.Load() != 0 {
		t.Fatalf("%d reads returned a torn or recycled item", bad.Load())
	}
	if s.Recycled == 0 || writes.Load() < 100 {
		t.Fatalf("the torture recycled %d buffers in %d writes: it tested nothing", s.Recycled, writes.Load())
	}
}

func TestHelpersAllocateNothing(t *testing.T) {
	wrs := make([]verbs.SendWR, 4)
	sge := verbs.SGE{Addr: 4096, Length: 64, LKey: 1}
	// The first use gives each request's scatter list its backing array.
	prism.AllocWriteInstall(wrs, 1, sge, 2, 0, 8192, 4096, sge, 0)
	a := testing.AllocsPerRun(1000, func() {
		prism.IndirectRead(wrs, 1, sge, 2, 8192, true)
		prism.AllocWriteInstall(wrs, 1, sge, 2, 0, 8192, 4096, sge, 0)
		prism.CASIfGreater(wrs, 1, sge, 2, 8192, 16, [4]uint64{1, 2}, [4]uint64{})
	})
	if a != 0 {
		t.Errorf("the helpers allocate %v times per call", a)
	}
}

// TestConcurrentAllocate has four clients ALLOCATE from one free list at
// once, on every transport: no buffer is handed out twice.
func TestConcurrentAllocate(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp", "shm"} {
		t.Run(scheme, func(t *testing.T) {
			tb := newTestbedOn(t, scheme, 1<<20)
			pool, err := prism.NewPool(tb.pool, prism.PoolConfig{MinSize: 64, MaxSize: 64, Stock: 1024})
			if err != nil {
				t.Fatal(err)
			}
			q, _, _ := pool.Class(64)
			const clients, each = 4, 200
			addrs := make([][]uint64, clients)
			var wg sync.WaitGroup
			for i := 0; i < clients; i++ {
				c := tb.connect(t, fmt.Sprintf("c%d", i))
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					for k := 0; k < each; k++ {
						wr := verbs.SendWR{ID: 1, Opcode: verbs.OpAllocate, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{c.sge(0, 64)}, RKey: tb.pool.RKey(), Queue: q}
						wc := c.run(t, []verbs.SendWR{wr})
						if wc.Status != verbs.StatusSuccess {
							t.Errorf("client %d ALLOCATE %d: %v", i, k, wc.Status)
							return
						}
						addrs[i] = append(addrs[i], wc.Result)
					}
				}(i)
			}
			wg.Wait()
			seen := map[uint64]bool{}
			for _, as := range addrs {
				for _, a := range as {
					if seen[a] {
						t.Fatalf("buffer %#x handed out twice", a)
					}
					seen[a] = true
				}
			}
			if len(seen) != clients*each {
				t.Fatalf("%d distinct buffers, want %d", len(seen), clients*each)
			}
		})
	}
}

// TestReturnRingHole reserves a slot and never fills it (its client died
// between the two), then returns buffers behind it: Drain waits for the
// hole for HoleGrace, then passes it and takes them, and a fill of the
// hole that comes later still is drained a lap later.
func TestReturnRingHole(t *testing.T) {
	tb := newTestbed(t, 1<<20)
	pool, err := prism.NewPool(tb.pool, prism.PoolConfig{MinSize: 64, MaxSize: 64, Stock: 8})
	if err != nil {
		t.Fatal(err)
	}
	ringOff := tb.pool.Len() - prism.ReturnRingSize(4)
	ring, err := prism.NewReturnRing(tb.pool, ringOff, 4)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	prism.SetClock(ring, func() time.Time { return now })
	c := tb.connect(t, "c")
	buf := func(i int) prism.Returned { return prism.Returned{Addr: tb.pool.Addr() + uint64(64*i)} }
	// give reserves len(rets) slots and fills them (fill false: the
	// reservation only), returning the first reserved index.
	give := func(fill bool, rets ...prism.Returned) uint64 {
		t.Helper()
		if wc := c.run(t, prism.ReturnWRs(c.wrs, 1, tb.pool.RKey(), ring.Addr(), len(rets), c.sge(0, 8))); wc.Status != verbs.StatusSuccess {
			t.Fatal(wc.Status)
		}
		first := binary.NativeEndian.Uint64(c.buf.Bytes())
		if fill {
			fillAt(t, c, tb.pool.RKey(), ring, first, rets)
		}
		return first
	}
	drain := func(want int) {
		t.Helper()
		if n, err := ring.Drain(pool); n != want || err != nil {
			t.Fatalf("Drain = %d, %v; want %d (holes passed %d)", n, err, want, ring.Holes())
		}
	}
	hole := give(false, buf(0))
	give(true, buf(1), buf(2))
	drain(0) // the hole's client may be a round trip from filling it
	now = now.Add(prism.HoleGrace - time.Millisecond)
	drain(0)
	now = now.Add(time.Millisecond)
	drain(2)
	if ring.Holes() != 1 {
		t.Errorf("%d holes passed, want 1", ring.Holes())
	}
	// The hole's fill, late: drained when the drain comes round to its
	// slot again, after the slot reserved next.
	fillAt(t, c, tb.pool.RKey(), ring, hole, []prism.Returned{buf(0)})
	give(true, buf(3))
	drain(2)
	drain(0)
	if n, _ := pool.Reclaim(); n != 4 {
		t.Errorf("Reclaim recycled %d, want 4", n)
	}
}

// fillAt fills rets into ring's slots from index first, checking that
// none was occupied.
func fillAt(t *testing.T, c *conn, rkey uint32, ring *prism.ReturnRing, first uint64, rets []prism.Returned) {
	t.Helper()
	if wc := c.run(t, prism.FillWRs(c.wrs, 2, rkey, ring.Addr(), ring.Slots(), first, rets, c.sge(64, 8*len(rets)))); wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	for i := range rets {
		if v := binary.NativeEndian.Uint64(c.buf.Bytes()[64+8*i:]); v != 0 {
			t.Fatalf("slot %d was occupied (%#x)", first+uint64(i), v)
		}
	}
}

package transfer

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/shm"
)

// testArena is an arena registered on a device: its PD and MR.
type testArena struct {
	pd verbs.PD
	mr verbs.MR
}

// newArena allocates an arena of size bytes on dev, released after the
// test's later cleanups (the pairs using its PD).
func newArena(t *testing.T, dev verbs.Device, size int) *testArena {
	t.Helper()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.AllocMR(size, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mr.Deregister(); err != nil {
			t.Error(err)
		}
		if err := pd.Dealloc(); err != nil {
			t.Error(err)
		}
	})
	return &testArena{pd: pd, mr: mr}
}

// use has cfg READ through the arena.
func (a *testArena) use(cfg Config) Config {
	cfg.Arena, cfg.ArenaPD = a.mr, a.pd
	return cfg
}

// arenaRig is a holder and a fetcher, each with its store's arena
// registered (Config.Arena), on a loop fabric or on two shm devices in
// this process.
type arenaRig struct {
	src            *memSource
	srv            *Server
	hdev, fdev     verbs.Device
	harena, farena *testArena
	hnext          int
	fcfg           Config
	hostileCfg     Config // the fetcher's configuration without an arena
	hostileFabric  *loop.Fabric
}

var shmSeq int

func newArenaRig(t *testing.T, transport string, cfg Config, size int) *arenaRig {
	t.Helper()
	r := &arenaRig{src: newMemSource()}
	var err error
	switch transport {
	case "loop":
		r.hostileFabric = loop.Get(fmt.Sprintf("arena%d", fabricSeq.Add(1)))
		if r.hdev, err = r.hostileFabric.Open("holder"); err == nil {
			r.fdev, err = r.hostileFabric.Open("fetcher")
		}
	case "shm":
		shmSeq++
		name := fmt.Sprintf("objstore-transfer-%d-%d", os.Getpid(), shmSeq)
		if r.hdev, err = verbs.Open("shm://" + name + "-h"); err == nil {
			r.fdev, err = verbs.Open("shm://" + name + "-f")
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.hdev.Close(); r.fdev.Close() })
	r.harena, r.farena = newArena(t, r.hdev, size), newArena(t, r.fdev, size)
	hcfg := r.harena.use(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r.srv, err = NewServer(ctx, r.src, r.hdev, "127.0.0.1:0", "", hcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.srv.Close() })
	r.hostileCfg = cfg
	r.fcfg = r.farena.use(cfg)
	r.fcfg.Device = r.fdev
	r.fcfg.Peers = []string{r.srv.VerbsAddr()}
	return r
}

// add makes an object of n bytes inside the holder's arena and returns
// its ID and offset there.
func (r *arenaRig) add(t *testing.T, n int) (object.ID, int) {
	t.Helper()
	mem := r.harena.mr.Bytes()
	if r.hnext+n > len(mem) {
		t.Fatalf("holder arena full")
	}
	id := object.NewID()
	b := mem[r.hnext : r.hnext+n : r.hnext+n]
	for i := range b {
		b[i] = byte(i*7 + int(id[0]) + i>>13)
	}
	off := r.hnext
	r.hnext += n
	r.src.mu.Lock()
	r.src.objs[id] = memObj{b, n / 2}
	r.src.mu.Unlock()
	return id, off
}

func (r *arenaRig) fetcher(t *testing.T, p Protocol) *Fetcher {
	t.Helper()
	cfg := r.fcfg
	cfg.Protocol = p
	f, err := NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestArenaFetch fetches objects that live in the holder's arena into
// objects in the fetcher's arena by every verbs protocol, over loop and
// over shm (whose devices cannot register memory in place: a READ there
// works only through the arenas), and checks every byte, the protocol
// each object went by, and that no transfer registered anything.
func TestArenaFetch(t *testing.T) {
	const th = 8 << 10
	sizes := []int{1, 4095, th, 40 << 10, 3<<20 + 5}
	for _, transport := range []string{"loop", "shm"} {
		for _, p := range []Protocol{SendRecv, Read, Hybrid} {
			t.Run(fmt.Sprintf("%s/%v", transport, p), func(t *testing.T) {
				r := newArenaRig(t, transport, Config{Threshold: th, Slots: 4, SlotSize: 4096}, 8<<20)
				var ids []object.ID
				for _, n := range sizes {
					id, _ := r.add(t, n)
					ids = append(ids, id)
				}
				f := r.fetcher(t, p)
				sink := &arenaSink{mem: r.farena.mr.Bytes(), objs: map[object.ID][]byte{}}
				for i, err := range f.Fetch(testCtx(t), ids, sink) {
					if err != nil {
						t.Fatalf("size %d: %v", sizes[i], err)
					}
					b, ok := sink.objs[ids[i]]
					if !ok || sha256.Sum256(b) != r.src.sum(ids[i]) {
						t.Fatalf("size %d: fetched object differs (present %v)", sizes[i], ok)
					}
				}
				var reads int64
				for _, n := range sizes {
					if p == Read || p == Hybrid && n >= th {
						reads++
					}
				}
				st := f.Stats()
				if st.Transfers[Read] != reads || st.Transfers[SendRecv] != int64(len(sizes))-reads {
					t.Errorf("transfers %v, want %d by READ", st.Transfers, reads)
				}
				// The holder counts a READ when its FIN is in.
				eventually(t, "the holder served them all, nothing pinned", func() bool {
					return r.srv.Stats().Transfers[Read] == reads && r.src.pins.Load() == 0
				})
				if st.Registered != 0 || r.srv.Stats().Registered != 0 {
					t.Errorf("registrations made: fetcher %d, holder %d", st.Registered, r.srv.Stats().Registered)
				}
			})
		}
	}
}

// TestArenaReadInfo: with an arena, READ_INFO names the object by the
// arena's rkey and its address in the arena, and — the trade-off doc.go
// states — that rkey reads any byte of the arena through the pair,
// during the transfer and after its FIN.
func TestArenaReadInfo(t *testing.T) {
	r := newArenaRig(t, "loop", Config{Slots: 4, SlotSize: 4096}, 1<<20)
	r.add(t, 4096) // another object, before the one fetched
	id, off := r.add(t, 64<<10)
	rig := &rig{fabric: r.hostileFabric, src: r.src, srv: r.srv, hdev: r.hdev, fdev: r.fdev, cfg: r.hostileCfg}
	rp := hostileFetcher(t, rig, true)
	reads := make(chan verbs.Status, 2)
	rp.p.onRead = func(_ uint32, st verbs.Status) { reads <- st }
	req := make([]byte, transferLen)
	encodeTransfer(req, 1, id, Read, 0)
	rp.send(t, req)
	if m := rp.next(t); m.typ != msgData || m.proto != Read {
		t.Fatalf("got %s (%v), want DATA by READ", msgName(m.typ), m.proto)
	}
	info := rp.next(t)
	if info.typ != msgReadInfo || info.length != 64<<10 {
		t.Fatalf("got %s of %d bytes, want READ_INFO", msgName(info.typ), info.length)
	}
	if info.rkey != r.harena.mr.RKey() || info.addr != r.harena.mr.Addr()+uint64(off) {
		t.Fatalf("READ_INFO {addr %#x rkey %#x}, want {%#x %#x}", info.addr, info.rkey, r.harena.mr.Addr()+uint64(off), r.harena.mr.RKey())
	}
	readArenaStart := func() verbs.Status {
		t.Helper()
		err := rp.p.qp.PostSend([]verbs.SendWR{{
			ID: kindRead | 1, Opcode: verbs.OpRead,
			SGL:        []verbs.SGE{{Addr: rp.p.recvMR.Addr(), Length: 64, LKey: rp.p.recvMR.LKey()}},
			RemoteAddr: r.harena.mr.Addr(), RKey: info.rkey,
		}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case st := <-reads:
			return st
		case <-time.After(5 * time.Second):
			t.Fatal("no READ completion")
		}
		return 0
	}
	if st := readArenaStart(); st != verbs.StatusSuccess {
		t.Fatalf("READ of another object of the arena: %v, want success (the arena is one region)", st)
	}
	fin := make([]byte, finLen)
	encodeFin(fin, 1, finDone)
	rp.send(t, fin)
	eventually(t, "the holder releases the pin at FIN", func() bool { return r.src.pins.Load() == 0 })
	if st := readArenaStart(); st != verbs.StatusSuccess {
		t.Fatalf("READ of the arena after FIN: %v, want success (the arena stays registered)", st)
	}
}

// TestArenaOutside: objects outside the arenas on shm, whose devices
// cannot register them in place. A holder's object goes by SEND/RECV
// instead; a fetcher whose created object is outside its arena fails
// that fetch with ErrNotSupported and aborts it.
func TestArenaOutside(t *testing.T) {
	r := newArenaRig(t, "shm", Config{Slots: 4, SlotSize: 4096}, 1<<20)
	heap := r.src.add(100<<10, 0) // in Go memory
	f := r.fetcher(t, Read)
	sink := newMemSink()
	if err := f.Fetch(testCtx(t), []object.ID{heap}, sink)[0]; err != nil {
		t.Fatal(err)
	}
	if got, _ := sink.sum(heap); got != r.src.sum(heap) {
		t.Fatal("fetched object differs")
	}
	if st := f.Stats(); st.Transfers[SendRecv] != 1 {
		t.Fatalf("transfers %v, want the one by SEND/RECV", st.Transfers)
	}

	inArena, _ := r.add(t, 100<<10)
	err := f.Fetch(testCtx(t), []object.ID{inArena}, sink)[0]
	if !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("READ into memory outside the fetcher's arena: %v, want ErrNotSupported", err)
	}
	eventually(t, "the object aborted and the holder released", func() bool {
		return sink.settled() && r.src.pins.Load() == 0
	})
	if sink.aborts.Load() != 1 {
		t.Fatalf("%d aborts, want 1", sink.aborts.Load())
	}
}

// TestInArena: an object's address is found from its place in the
// arena, and anything not entirely inside it has none.
func TestInArena(t *testing.T) {
	fabric := loop.Get(fmt.Sprintf("inarena%d", fabricSeq.Add(1)))
	dev, err := fabric.Open("n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	a := newArena(t, dev, 1<<16)
	mem := a.mr.Bytes()
	if addr, ok := inArena(a.mr, mem[100:300]); !ok || addr != a.mr.Addr()+100 {
		t.Fatalf("[100, 300): %#x %v, want %#x", addr, ok, a.mr.Addr()+100)
	}
	if addr, ok := inArena(a.mr, mem[len(mem)-1:]); !ok || addr != a.mr.Addr()+uint64(len(mem)-1) {
		t.Fatal("the arena's last byte has no address")
	}
	other := make([]byte, 2<<16)
	for name, b := range map[string][]byte{
		"empty":        mem[10:10],
		"Go memory":    other[:64],
		"whole arena+": other,
		"past its end": unsafe.Slice(&mem[len(mem)-8], 16), // never accessed
	} {
		if _, ok := inArena(a.mr, b); ok {
			t.Errorf("%s: an address in the arena, want none", name)
		}
	}
	if _, ok := inArena(nil, mem[:8]); ok {
		t.Error("no arena: an address, want none")
	}
}

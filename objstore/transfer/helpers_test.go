package transfer

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/tcp"
)

// memSource is a holder's store in Go memory.
type memSource struct {
	mu     sync.Mutex
	objs   map[object.ID]memObj
	pins   atomic.Int64
	onPin  func(id object.ID) // called before Pin answers, if set
	pinned atomic.Int64       // Pin calls that succeeded
}

type memObj struct {
	b        []byte
	dataSize int
}

func newMemSource() *memSource { return &memSource{objs: map[object.ID]memObj{}} }

// add makes an object of data+meta bytes with a recognisable pattern.
func (s *memSource) add(data, meta int) object.ID {
	id := object.NewID()
	b := make([]byte, data+meta)
	for i := range b {
		b[i] = byte(i*31 + int(id[0]) + i>>11)
	}
	s.mu.Lock()
	s.objs[id] = memObj{b, data}
	s.mu.Unlock()
	return id
}

func (s *memSource) sum(id object.ID) [32]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sha256.Sum256(s.objs[id].b)
}

func (s *memSource) Pin(id object.ID) ([]byte, int, func(), error) {
	if s.onPin != nil {
		s.onPin(id)
	}
	s.mu.Lock()
	o, ok := s.objs[id]
	s.mu.Unlock()
	if !ok {
		return nil, 0, nil, fmt.Errorf("%w: %v", object.ErrNotFound, id)
	}
	s.pins.Add(1)
	s.pinned.Add(1)
	var once sync.Once
	return o.b, o.dataSize, func() { once.Do(func() { s.pins.Add(-1) }) }, nil
}

// memSink is a fetcher's store in Go memory; it counts what happens.
type memSink struct {
	mu       sync.Mutex
	objs     map[object.ID][]byte
	sizes    map[object.ID][2]int
	creating map[object.ID]bool
	creates  atomic.Int64
	commits  atomic.Int64
	aborts   atomic.Int64
	onCreate func(id object.ID) // called after Create made the object, if set
	full     bool
}

func newMemSink() *memSink {
	return &memSink{objs: map[object.ID][]byte{}, sizes: map[object.ID][2]int{}, creating: map[object.ID]bool{}}
}

func (s *memSink) Create(id object.ID, dataSize, metaSize int) ([]byte, func() error, func(), error) {
	s.mu.Lock()
	if s.full {
		s.mu.Unlock()
		return nil, nil, nil, object.ErrStoreFull
	}
	if _, ok := s.objs[id]; ok || s.creating[id] {
		s.mu.Unlock()
		return nil, nil, nil, fmt.Errorf("%w: %v", object.ErrExists, id)
	}
	s.creating[id] = true
	s.mu.Unlock()
	s.creates.Add(1)
	dst := make([]byte, dataSize+metaSize)
	var once sync.Once
	end := func(keep bool) {
		once.Do(func() {
			s.mu.Lock()
			delete(s.creating, id)
			if keep {
				s.objs[id] = dst
				s.sizes[id] = [2]int{dataSize, metaSize}
				s.commits.Add(1)
			} else {
				s.aborts.Add(1)
			}
			s.mu.Unlock()
		})
	}
	if s.onCreate != nil {
		s.onCreate(id)
	}
	return dst, func() error { end(true); return nil }, func() { end(false) }, nil
}

func (s *memSink) sum(id object.ID) ([32]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objs[id]
	return sha256.Sum256(b), ok
}

// settled reports whether every created object was committed or
// aborted.
func (s *memSink) settled() bool { return s.creates.Load() == s.commits.Load()+s.aborts.Load() }

var fabricSeq atomic.Int64

// rig is a holder and a fetcher's device on a fresh loop fabric (or on
// tcp devices).
type rig struct {
	fabric *loop.Fabric
	src    *memSource
	srv    *Server
	hdev   verbs.Device
	fdev   verbs.Device
	cfg    Config
}

// newRig starts a Server over a loop fabric ("loop") or tcp devices
// ("tcp"); cfg is what both sides use.
func newRig(t testing.TB, transport string, cfg Config) *rig {
	t.Helper()
	r := &rig{src: newMemSource(), cfg: cfg}
	var err error
	switch transport {
	case "loop":
		r.fabric = loop.Get(fmt.Sprintf("transfer%d", fabricSeq.Add(1)))
		if r.hdev, err = r.fabric.Open("holder"); err != nil {
			t.Fatal(err)
		}
		if r.fdev, err = r.fabric.Open("fetcher"); err != nil {
			t.Fatal(err)
		}
	case "tcp":
		if r.hdev, err = verbs.Open("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if r.fdev, err = verbs.Open("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { r.hdev.Close(); r.fdev.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r.srv, err = NewServer(ctx, r.src, r.hdev, "127.0.0.1:0", "127.0.0.1:0", cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.srv.Close() })
	return r
}

// fetcher makes a fetcher of protocol p to the rig's server.
func (r *rig) fetcher(t testing.TB, p Protocol) *Fetcher {
	t.Helper()
	cfg := r.cfg
	cfg.Protocol = p
	cfg.Device = r.fdev
	cfg.Peers = []string{r.srv.VerbsAddr()}
	if !p.Verbs() {
		cfg.Peers = []string{r.srv.TCPAddr()}
	}
	f, err := NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

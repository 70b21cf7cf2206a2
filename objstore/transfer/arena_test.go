package transfer

import (
	"crypto/sha256"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// arenaSink creates objects in a registered arena (bump allocation), or
// in Go memory when outside is set.
type arenaSink struct {
	mu      sync.Mutex
	mem     []byte
	next    int
	outside bool
	objs    map[object.ID][]byte
}

func (s *arenaSink) Create(id object.ID, dataSize, metaSize int) ([]byte, func() error, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := dataSize + metaSize
	var dst []byte
	if s.outside {
		dst = make([]byte, n)
	} else {
		if s.next+n > len(s.mem) {
			return nil, nil, nil, object.ErrStoreFull
		}
		dst = s.mem[s.next : s.next+n : s.next+n]
		s.next += n
	}
	commit := func() error {
		s.mu.Lock()
		s.objs[id] = dst
		s.mu.Unlock()
		return nil
	}
	return dst, commit, func() {}, nil
}

// TestArena: objects in a pre-registered arena are READ with the arena's
// keys, with no registration per transfer on either side; objects
// outside it still are registered, and pairs live in the arena's PD.
func TestArena(t *testing.T) {
	r := newRig(t, "loop", Config{}) // for the fabric and the devices
	hpd, err := r.hdev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	harena, err := hpd.AllocMR(4<<20, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	fpd, err := r.fdev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	farena, err := fpd.AllocMR(4<<20, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	src := newMemSource()
	inside := object.NewID()
	obj := harena.Bytes()[4096 : 4096+(1<<20)+3]
	for i := range obj {
		obj[i] = byte(i * 7)
	}
	src.objs[inside] = memObj{obj, 1 << 20}
	outside := src.add(300<<10, 5)

	srv, err := NewServer(testCtx(t), src, r.hdev, "127.0.0.1:0", "", Config{Arena: harena, ArenaPD: hpd})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f, err := NewFetcher(Config{Protocol: Read, Device: r.fdev, Peers: []string{srv.VerbsAddr()}, Arena: farena, ArenaPD: fpd})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sink := &arenaSink{mem: farena.Bytes(), objs: map[object.ID][]byte{}}
	if err := f.Fetch(testCtx(t), []object.ID{inside}, sink)[0]; err != nil {
		t.Fatal(err)
	}
	if got := sink.objs[inside]; sha256.Sum256(got) != sha256.Sum256(obj) {
		t.Fatal("object READ through the arenas differs")
	}
	if fs, ss := f.Stats(), srv.Stats(); fs.Registered != 0 || ss.Registered != 0 || fs.Transfers[Read] != 1 {
		t.Fatalf("arena transfer registered: fetcher %+v server %+v", fs, ss)
	}
	sink.outside = true
	if err := f.Fetch(testCtx(t), []object.ID{outside}, sink)[0]; err != nil {
		t.Fatal(err)
	}
	if got := sink.objs[outside]; sha256.Sum256(got) != src.sum(outside) {
		t.Fatal("object outside the arenas differs")
	}
	if fs, ss := f.Stats(), srv.Stats(); fs.Registered != 1 || ss.Registered != 1 || fs.Registrations != 0 {
		t.Fatalf("outside transfer: fetcher %+v server %+v", fs, ss)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The pairs left the shared PDs as they found them: only the
	// arenas are in them.
	for _, m := range []verbs.MR{harena, farena} {
		if err := m.Deregister(); err != nil {
			t.Fatal(err)
		}
	}
	for _, pd := range []verbs.PD{hpd, fpd} {
		if err := pd.Dealloc(); err != nil {
			t.Fatalf("shared PD still busy after Close: %v", err)
		}
	}
	if _, err := NewFetcher(Config{Arena: farena}); err == nil {
		t.Fatal("an Arena without its PD was accepted")
	}
}

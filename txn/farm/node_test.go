package farm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var nodeSeq atomic.Int64

// testNode is a node with a layout, on a loop device, and a session with
// a ring, as MethodOpen leaves it.
func testNode(t testing.TB) (*Node, *session) {
	t.Helper()
	dev, err := verbs.Open(fmt.Sprintf("loop://farm-node-test-%d/n0", nodeSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := Service(NodeConfig{MaxClients: 2, Logger: slog.New(slog.DiscardHandler)}, nil)(dev, pd)
	if err != nil {
		t.Fatal(err)
	}
	n := svc.(*Node)
	t.Cleanup(func() { n.Close(); dev.Close() })
	l := Layout{Nodes: []string{"a:1", "b:2", "c:3"}, F: 1, Buckets: 64, ValueSize: 64}
	if _, err := n.create(append(l.marshal(), 0), nil); err != nil {
		t.Fatal(err)
	}
	s := &session{n: n}
	resp := make([]byte, 1024)
	if _, err := n.open(s, binary.LittleEndian.AppendUint64(nil, 42), resp); err != nil {
		t.Fatal(err)
	}
	return n, s
}

// lockReq is a LOCK request of shard 0 for writes.
func lockReq(seq uint64, ws ...write) []byte {
	req := binary.LittleEndian.AppendUint64(nil, seq)
	req = append(req, 0)
	info := txInfo{parts: []int{0}, sids: []uint32{1, 0, 0}}
	req = info.append(req)
	return appendWrites(req, ws)
}

// TestNodeLocks: LOCK locks and reports versions, refuses a held lock
// and a changed version, and leaves nothing locked when it refuses.
func TestNodeLocks(t *testing.T) {
	n, s := testNode(t)
	resp := make([]byte, 256)
	m, err := n.lock(s, lockReq(1, write{op: opPut, key: []byte("x"), value: []byte("1")}, write{op: opPut, key: []byte("y"), value: []byte("2")}), resp)
	if err != nil || m != 17 || resp[0] != lockOK {
		t.Fatalf("lock: %d %v status %d", m, err, resp[0])
	}
	m, err = n.lock(s, lockReq(2, write{op: opPut, key: []byte("z")}, write{op: opPut, key: []byte("y")}), resp)
	if err != nil || m != 3 || resp[0] != lockLocked || binary.LittleEndian.Uint16(resp[1:]) != 1 {
		t.Fatalf("lock of a locked object: %d %v %v", m, err, resp[:3])
	}
	n.mu.Lock()
	n.install(n.locks[txKey{42, 1}])
	delete(n.locks, txKey{42, 1})
	slot, _ := n.find(0, []byte("z"))
	zw := loadWord(n.slot(0, slot))
	n.mu.Unlock()
	if zw != 0 {
		t.Fatalf("the refused LOCK left z's slot at %#x", zw)
	}
	m, err = n.lock(s, lockReq(3, write{op: opPut, expect: true, version: 0, key: []byte("x")}), resp)
	if err != nil || m != 3 || resp[0] != lockChanged {
		t.Fatalf("lock of a changed version: %d %v %v", m, err, resp[:3])
	}
	m, err = n.lock(s, lockReq(4, write{op: opDelete, expect: true, version: 1, key: []byte("x")}), resp)
	if err != nil || resp[0] != lockOK || binary.LittleEndian.Uint64(resp[1:]) != 1 {
		t.Fatalf("lock at the version read: %d %v %v", m, err, resp[:9])
	}
	if _, err := n.lock(s, lockReq(4, write{op: opPut, key: []byte("q")}), resp); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a transaction locked twice: %v", err)
	}
}

// FuzzNodeRequests: no bytes make a node's handlers panic.
func FuzzNodeRequests(f *testing.F) {
	f.Add(lockReq(1, write{op: opPut, key: []byte("k"), value: []byte("v")}))
	f.Add([]byte{})
	n, s := testNode(f)
	resp := make([]byte, 4096)
	var seq uint64
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 8 {
			seq++
			binary.LittleEndian.PutUint64(b, seq<<20) // a new transaction each time
		}
		_, _ = n.lock(s, b, resp)
		_, _ = n.fenceCall(b, resp)
		_, _ = n.decideCall(b, resp)
		_, _ = n.create(b, resp)
	})
}

// TestCollector: the node's metrics describe and collect without error.
func TestCollector(t *testing.T) {
	n, s := testNode(t)
	resp := make([]byte, 64)
	if _, err := n.lock(s, lockReq(1, write{op: opPut, key: []byte("x")}), resp); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(n.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "rdmakit_farm_transactions" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "locked" && m.GetGauge().GetValue() == 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Fatal("the locked transaction is not in the metrics")
	}
}

// TestAppliedSetAges: an applied transaction is remembered for keep at
// least, and forgotten within about 8/7 of it.
func TestAppliedSetAges(t *testing.T) {
	var a appliedSet
	const keep = 7 * time.Second
	t0 := time.Unix(1000, 0)
	a.age(t0, keep)
	k := txKey{1, 2}
	a.add(k)
	for d := time.Duration(0); d <= 2*keep; d += 100 * time.Millisecond {
		a.age(t0.Add(d), keep)
		if has := a.has(k); has != (d < keep+keep/7) && (d < keep || d > keep+keep/7+time.Second) {
			t.Fatalf("after %v: remembered %v", d, has)
		}
		if d < keep && !a.has(k) {
			t.Fatalf("forgotten after %v, before %v", d, keep)
		}
	}
	if a.has(k) {
		t.Fatal("remembered after twice keep")
	}
}

// TestBadRecordFences: a record that does not decode ends its client's
// connection; nothing after it is taken.
func TestBadRecordFences(t *testing.T) {
	n, s := testNode(t)
	w := ringWriter{size: s.ring.size}
	put := func(body []byte) {
		length := (recHeader + len(body) + 7) &^ 7
		pos, _, _, _, _ := w.reserve(length)
		copy(ringData(s.ring.ring)[pos%uint64(w.size)+recHeader:], body)
		w.putHeader(ringData(s.ring.ring)[pos%uint64(w.size):], length, pos)
	}
	put(make([]byte, 24)) // kind 0: not a record
	put(appendRecord(nil, &record{kind: recAbort, seq: 1}))
	n.mu.Lock()
	took := n.takeRecords(s)
	fenced := s.fenced
	n.mu.Unlock()
	if took != 1 || !fenced {
		t.Fatalf("took %d records, fenced %v: want the bad one only, and the session fenced", took, fenced)
	}
}

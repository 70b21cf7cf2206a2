package transfer

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// TestRKeyPerPairAndTransfer: the rkey a holder hands out in READ_INFO
// works through the pair it was sent on and no other, and dies at FIN.
func TestRKeyPerPairAndTransfer(t *testing.T) {
	r := newRig(t, "loop", Config{Slots: 4, SlotSize: 4096})
	id := r.src.add(64<<10, 0)
	reads := make(chan verbs.Status, 4)
	a, b := hostileFetcher(t, r, true), hostileFetcher(t, r, true)
	for _, rp := range []*rawPeer{a, b} {
		rp.p.onRead = func(_ uint32, st verbs.Status) { reads <- st }
	}
	req := make([]byte, transferLen)
	encodeTransfer(req, 1, id, Read, 0)
	a.send(t, req)
	if m := a.next(t); m.typ != msgData || m.proto != Read {
		t.Fatalf("got %s (%v), want DATA by READ", msgName(m.typ), m.proto)
	}
	info := a.next(t)
	if info.typ != msgReadInfo || info.length != 64<<10 {
		t.Fatalf("got %s of %d bytes, want READ_INFO", msgName(info.typ), info.length)
	}
	read := func(rp *rawPeer) verbs.Status {
		t.Helper()
		err := rp.p.qp.PostSend([]verbs.SendWR{{
			ID: kindRead | 1, Opcode: verbs.OpRead,
			SGL:        []verbs.SGE{{Addr: rp.p.recvMR.Addr(), Length: 64, LKey: rp.p.recvMR.LKey()}},
			RemoteAddr: info.addr, RKey: info.rkey,
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
	if st := read(b); st != verbs.StatusRemAccessErr {
		t.Fatalf("READ with another pair's rkey: %v, want REM_ACCESS_ERR", st)
	}
	if st := read(a); st != verbs.StatusSuccess {
		t.Fatalf("READ through the pair the rkey was sent on: %v", st)
	}
	fin := make([]byte, finLen)
	encodeFin(fin, 1, finDone)
	a.send(t, fin)
	eventually(t, "the holder deregisters at FIN", func() bool { return r.srv.Stats().Registrations == 0 && r.src.pins.Load() == 0 })
	if st := read(a); st != verbs.StatusRemAccessErr {
		t.Fatalf("READ after FIN: %v, want REM_ACCESS_ERR", st)
	}
}

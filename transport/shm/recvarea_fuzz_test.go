package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// FuzzRecvAreaGarbage scribbles a published receive queue's deposit area
// (header, descriptors and completions, as a hostile peer could) and then
// drives every path of the device that reads it back: taking deposited
// completions, posting receives, delivering over the ring path's lock,
// flushing the queue, withdrawing the area. Nothing may panic or hang,
// and every completion that comes out names the QP.
func FuzzRecvAreaGarbage(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 512))
	ff := make([]byte, 512)
	for i := range ff {
		ff[i] = 0xff
	}
	f.Add(ff)
	plausible := make([]byte, aHeader-16)
	binary.LittleEndian.PutUint64(plausible[aConsumed-16:], 3)
	binary.LittleEndian.PutUint64(plausible[aCTail-16:], 2)
	binary.LittleEndian.PutUint32(plausible[aJValid-16:], 1)
	binary.LittleEndian.PutUint64(plausible[aJHead-16:], 1)
	f.Add(plausible)
	dev, err := verbs.Open(fmt.Sprintf("shm://fuzz-area-%d", os.Getpid()))
	if err != nil {
		f.Fatal(err)
	}
	defer dev.Close()
	d := dev.(*device)
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(256)
	mr, err := pd.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxRecvWR: 8}})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
			t.Fatal(err)
		}
		nq := q.(*nic.QP)
		a, ok := nq.RecvAreaOf().(*recvArea)
		if !ok {
			// Areas given up are not reused: a long fuzzing run fills
			// the deposit segment.
			_ = q.Destroy()
			t.Skip("deposit segment full")
		}
		post := func() {
			_ = q.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}})
		}
		post()
		post()
		// The header after the lock, then the descriptors and completions.
		copy(a.a[16:aHeader], data)
		if len(data) > aHeader-16 {
			body := a.a[aHeader:]
			for i := 0; i < len(body); i += len(data) {
				copy(body[i:], data)
			}
		}
		*d.dep.pending() = 1
		d.drain()
		post()
		if err := q.Modify(verbs.QPAttr{State: verbs.StateError}); err != nil {
			t.Fatal(err)
		}
		d.drain()
		wc := make([]verbs.WC, 64)
		for {
			n, err := cq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, w := range wc[:n] {
				if w.QPN != q.QPN() {
					t.Fatalf("completion for QP %d, want %d: %+v", w.QPN, q.QPN(), w)
				}
			}
		}
		if err := q.Destroy(); err != nil {
			t.Fatal(err)
		}
	})
}

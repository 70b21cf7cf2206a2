package nic_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// fuzzRig is a pair of loop nodes with RC and UD QPs and regions of every
// kind a work request can name: good ones, ones lacking access, ones of
// another PD and deregistered ones. It lives for the whole fuzzing
// process; QPs that reach ERROR are recreated.
type fuzzRig struct {
	a, b     verbs.Device
	pda, pdb verbs.PD
	cqa, cqb verbs.CQ
	qa, qb   verbs.QP // RC, connected
	ua, ub   verbs.QP // UD
	ah       verbs.AH
	ahOther  verbs.AH // of another PD
	local    []verbs.MR
	remote   []verbs.MR
	gone     [2]struct {
		addr       uint64
		lkey, rkey uint32
	}
}

const fuzzQKey = 0x2222

var (
	fuzzSeq atomic.Int64
	rig     *fuzzRig
)

func newFuzzRig(t testing.TB) *fuzzRig {
	f := loop.Get(fmt.Sprintf("fuzz%d", fuzzSeq.Add(1)))
	r := &fuzzRig{}
	var err error
	chk := func(e error) {
		if e != nil {
			t.Fatal(e)
		}
	}
	r.a, err = f.Open("a")
	chk(err)
	r.b, err = f.Open("b")
	chk(err)
	r.pda, err = r.a.AllocPD()
	chk(err)
	r.pdb, err = r.b.AllocPD()
	chk(err)
	r.cqa, err = r.a.CreateCQ(1 << 14)
	chk(err)
	r.cqb, err = r.b.CreateCQ(1 << 14)
	chk(err)
	otherA, err := r.a.AllocPD()
	chk(err)
	otherB, err := r.b.AllocPD()
	chk(err)
	mrs := func(d verbs.Device, pd, other verbs.PD) []verbs.MR {
		var out []verbs.MR
		for _, m := range []struct {
			pd     verbs.PD
			size   int
			access verbs.Access
		}{
			{pd, 8192, verbs.AccessAll},
			{pd, 4096, verbs.AccessRemoteRead},
			{pd, 4096, verbs.AccessLocalWrite | verbs.AccessRemoteWrite},
			{pd, 64, verbs.AccessLocalWrite | verbs.AccessRemoteAtomic},
			{other, 4096, verbs.AccessAll},
		} {
			mr, err := m.pd.AllocMR(m.size, m.access)
			chk(err)
			out = append(out, mr)
		}
		return out
	}
	r.local = mrs(r.a, r.pda, otherA)
	r.remote = mrs(r.b, r.pdb, otherB)
	for i, pd := range []verbs.PD{r.pda, r.pdb} {
		mr, err := pd.AllocMR(4096, verbs.AccessAll)
		chk(err)
		r.gone[i].addr, r.gone[i].lkey, r.gone[i].rkey = mr.Addr(), mr.LKey(), mr.RKey()
		chk(mr.Deregister())
	}
	r.ah, err = r.pda.CreateAH(r.b.Address())
	chk(err)
	r.ahOther, err = otherA.CreateAH(r.b.Address())
	chk(err)
	r.resetRC(t)
	r.resetUD(t)
	return r
}

func (r *fuzzRig) resetRC(t testing.TB) {
	for _, q := range []verbs.QP{r.qa, r.qb} {
		if q != nil {
			q.Destroy()
		}
	}
	r.drain(t)
	var err error
	r.qa, err = r.pda.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: r.cqa, RecvCQ: r.cqa, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	if err != nil {
		t.Fatal(err)
	}
	r.qb, err = r.pdb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: r.cqb, RecvCQ: r.cqb, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    verbs.QP
		peer verbs.Device
		qpn  uint32
	}{{r.qa, r.b, r.qb.QPN()}, {r.qb, r.a, r.qa.QPN()}} {
		steps := []verbs.QPAttr{
			{State: verbs.StateInit, Access: verbs.AccessAll},
			{State: verbs.StateRTR, Dest: c.peer.Address(), DestQPN: c.qpn},
			{State: verbs.StateRTS, RNRRetry: verbs.NoRNRRetry},
		}
		for _, a := range steps {
			if err := c.q.Modify(a); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (r *fuzzRig) resetUD(t testing.TB) {
	for _, q := range []verbs.QP{r.ua, r.ub} {
		if q != nil {
			q.Destroy()
		}
	}
	r.drain(t)
	var err error
	r.ua, err = r.pda.CreateQP(verbs.QPInitAttr{Type: verbs.UD, SendCQ: r.cqa, RecvCQ: r.cqa, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	if err != nil {
		t.Fatal(err)
	}
	r.ub, err = r.pdb.CreateQP(verbs.QPInitAttr{Type: verbs.UD, SendCQ: r.cqb, RecvCQ: r.cqb, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []verbs.QP{r.ua, r.ub} {
		if err := verbs.ActivateUD(q, fuzzQKey); err != nil {
			t.Fatal(err)
		}
	}
}

// drain empties both CQs, checking every status.
func (r *fuzzRig) drain(t testing.TB) {
	var wc [64]verbs.WC
	for _, cq := range []verbs.CQ{r.cqa, r.cqb} {
		for {
			n, err := cq.Poll(wc[:])
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			for _, w := range wc[:n] {
				checkStatus(t, w)
			}
			if n == 0 {
				break
			}
		}
	}
}

func checkStatus(t testing.TB, w verbs.WC) {
	if strings.HasPrefix(w.Status.String(), "Status(") {
		t.Fatalf("completion with invalid status %d: %+v", w.Status, w)
	}
}

// fuzzReader decodes fuzz bytes; past the end it yields zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzReader) u16() uint16 { return uint16(r.u8()) | uint16(r.u8())<<8 }
func (r *fuzzReader) u32() uint32 { return uint32(r.u16()) | uint32(r.u16())<<16 }
func (r *fuzzReader) u64() uint64 { return uint64(r.u32()) | uint64(r.u32())<<32 }

// localSGE picks a local scatter/gather entry: inside a real region (of
// any access or PD), in a deregistered one, or arbitrary.
func (r *fuzzRig) localSGE(in *fuzzReader) verbs.SGE {
	sel := in.u8()
	off := uint64(int64(int16(in.u16())))
	n := uint32(in.u16() % 9000)
	if sel&0x80 != 0 {
		n = uint32(1) << (in.u8() % 8) // atomic-sized lengths are common
	}
	switch k := int(sel&0x7f) % 8; {
	case k < len(r.local):
		m := r.local[k]
		return verbs.SGE{Addr: m.Addr() + off, Length: n, LKey: m.LKey()}
	case k == 5:
		return verbs.SGE{Addr: r.gone[0].addr + off, Length: n, LKey: r.gone[0].lkey}
	case k == 6:
		m := r.remote[0] // a region of the other node
		return verbs.SGE{Addr: m.Addr() + off, Length: n, LKey: m.LKey()}
	default:
		return verbs.SGE{Addr: in.u64(), Length: in.u32(), LKey: in.u32()}
	}
}

// decodeWR turns fuzz bytes into a signaled send work request and says
// whether it goes to the UD QP.
func (r *fuzzRig) decodeWR(in *fuzzReader) (verbs.SendWR, bool) {
	var w verbs.SendWR
	ud := in.u8()&7 == 0
	w.ID = uint64(in.u16())
	if op := in.u8(); op < 220 {
		w.Opcode = verbs.Opcode(op % 11)
	} else {
		w.Opcode = verbs.Opcode(op)
	}
	f := in.u8()
	w.Flags = verbs.FlagSignaled | verbs.SendFlags(f&0xe)
	if f&0x10 != 0 {
		w.Flags |= 1 << (in.u8() % 32)
	}
	nsge := int(in.u8() % 7)
	for range nsge {
		w.SGL = append(w.SGL, r.localSGE(in))
	}
	w.Imm = in.u32()
	sel := in.u8()
	off := uint64(int64(int16(in.u16())))
	switch k := int(sel) % 8; {
	case k < len(r.remote):
		w.RemoteAddr, w.RKey = r.remote[k].Addr()+off, r.remote[k].RKey()
	case k == 5:
		w.RemoteAddr, w.RKey = r.gone[1].addr+off, r.gone[1].rkey
	case k == 6:
		w.RemoteAddr, w.RKey = r.remote[0].Addr()+off, in.u32()
	default:
		w.RemoteAddr, w.RKey = in.u64(), in.u32()
	}
	if w.Opcode.IsAtomic() {
		sizes := [...]uint8{8, 16, 32, 8, 16, 32, 0, 12}
		s := in.u8()
		w.Atomic.Size = sizes[s%8]
		w.Atomic.Op = verbs.CompareOp(in.u8() % 8)
		for i := range 4 {
			w.Atomic.Compare[i], w.Atomic.Swap[i] = in.u64(), in.u64()
			w.Atomic.CompareMask[i], w.Atomic.SwapMask[i] = in.u64(), in.u64()
		}
	}
	if ud {
		switch in.u8() % 4 {
		case 0:
			w.AH = nil
		case 1:
			w.AH = r.ahOther
		default:
			w.AH = r.ah
		}
		w.RemoteQPN, w.RemoteQKey = r.ub.QPN(), fuzzQKey
		if x := in.u8(); x&1 != 0 {
			w.RemoteQPN = in.u32()
		} else if x&2 != 0 {
			w.RemoteQKey = in.u32()
		}
	}
	return w, ud
}

var postSentinels = []error{
	verbs.ErrInvalidArg, verbs.ErrInvalidState, verbs.ErrQueueFull, verbs.ErrNotSupported,
	verbs.ErrTooManySGE, verbs.ErrInlineTooLarge, verbs.ErrClosed,
}

// FuzzPostSend posts decoded work requests on real loop QPs: PostSend must
// either reject a request with a *verbs.PostError wrapping a verbs
// sentinel or complete it with a valid status, and nothing may panic.
func FuzzPostSend(f *testing.F) {
	le := binary.LittleEndian
	seed := func(parts ...any) []byte {
		var b []byte
		for _, p := range parts {
			switch v := p.(type) {
			case int:
				b = append(b, byte(v))
			case uint16:
				b = le.AppendUint16(b, v)
			case uint32:
				b = le.AppendUint32(b, v)
			case uint64:
				b = le.AppendUint64(b, v)
			}
		}
		return b
	}
	// rc, id, opcode, flags, nsge, sge(sel, off, len), imm, remote(sel, off), atomic...
	f.Add(seed(1, uint16(1), int(verbs.OpWrite), 0, 1, 0, uint16(0), uint16(64), uint32(0), 0, uint16(0)))
	f.Add(seed(1, uint16(2), int(verbs.OpRead), 0, 1, 0, uint16(8), uint16(64), uint32(0), 0, uint16(0)))
	f.Add(seed(1, uint16(3), int(verbs.OpAtomicCmpAndSwp), 0, 1, 0x80, uint16(0), uint16(0), 3, uint32(0), 0, uint16(8), 0, 0))
	f.Add(seed(1, uint16(4), int(verbs.OpMaskedCmpAndSwp), 0, 1, 0x80, uint16(0), uint16(0), 5, uint32(0), 0, uint16(32), 2, 2))
	f.Add(seed(1, uint16(5), int(verbs.OpMaskedFetchAndAdd), 0, 1, 0x80, uint16(0), uint16(0), 4, uint32(0), 0, uint16(16), 1, 0))
	f.Add(seed(1, uint16(6), int(verbs.OpSend), 2, 2, 0, uint16(0), uint16(16), 0, uint16(16), uint16(16), uint32(7)))
	f.Add(seed(1, uint16(7), int(verbs.OpWriteWithImm), 0, 1, 0, uint16(0), uint16(8), uint32(9), 0, uint16(0)))
	f.Add(seed(1, uint16(8), int(verbs.OpWrite), 0, 1, 4, uint16(0), uint16(8), uint32(0), 1, uint16(0)))
	f.Add(seed(1, uint16(9), int(verbs.OpRead), 0, 1, 1, uint16(0), uint16(8), uint32(0), 0, uint16(0xfff8)))
	f.Add(seed(1, uint16(10), int(verbs.OpAtomicFetchAndAdd), 0, 1, 0x80, uint16(0), uint16(0), 3, uint32(0), 5, uint16(4)))
	f.Add(seed(0, uint16(11), int(verbs.OpSend), 0, 1, 0, uint16(0), uint16(100), uint32(0), 0, uint16(0), 2, 0))
	f.Add(seed(0, uint16(12), int(verbs.OpSendWithImm), 2, 1, 0, uint16(0), uint16(5000), uint32(1), 0, uint16(0), 3, 1, uint32(5)))
	f.Add(seed(1, uint16(13), 250, 0x1f, 6))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if rig == nil {
			rig = newFuzzRig(t)
		}
		r := rig
		in := &fuzzReader{b: data}
		w, ud := r.decodeWR(in)
		q := r.qa
		if ud {
			q = r.ua
		}
		// Sometimes give the responder a receive (RC never retries RNR).
		if x := in.u8(); x&1 != 0 {
			rq := r.qb
			if ud {
				rq = r.ub
			}
			var sgl []verbs.SGE
			for range int(x>>1) % 3 {
				m := r.remote[int(in.u8())%len(r.remote)]
				sgl = append(sgl, verbs.SGE{Addr: m.Addr() + uint64(in.u8()), Length: uint32(in.u16() % 9000), LKey: m.LKey()})
			}
			if err := rq.PostRecv([]verbs.RecvWR{{ID: 1 << 40, SGL: sgl}}); err != nil {
				var pe *verbs.PostError
				if !errors.As(err, &pe) {
					t.Fatalf("PostRecv error %v is not a *verbs.PostError", err)
				}
			}
		}
		err := q.PostSend([]verbs.SendWR{w})
		if err != nil {
			var pe *verbs.PostError
			if !errors.As(err, &pe) || pe.Index != 0 {
				t.Fatalf("PostSend(%+v) error %v (%T) is not a *verbs.PostError at 0", w, err, err)
			}
			ok := false
			for _, s := range postSentinels {
				ok = ok || errors.Is(err, s)
			}
			if !ok {
				t.Fatalf("PostSend error %v wraps no verbs sentinel", err)
			}
		} else {
			var wc [1]verbs.WC
			deadline := time.Now().Add(5 * time.Second)
			for {
				n, err := r.cqa.Poll(wc[:])
				if err != nil {
					t.Fatalf("Poll: %v", err)
				}
				if n == 1 {
					if wc[0].ID == 1<<40 {
						checkStatus(t, wc[0]) // a flushed receive of ours
						continue
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no completion for signaled %+v", w)
				}
				time.Sleep(10 * time.Microsecond)
			}
			checkStatus(t, wc[0])
			if wc[0].ID != w.ID {
				t.Fatalf("completion for wr_id %d, posted %d", wc[0].ID, w.ID)
			}
			if wc[0].Status == verbs.StatusSuccess && wc[0].Opcode != verbs.WCOpcodeOf(w.Opcode) {
				t.Fatalf("successful %v completed as %v", w.Opcode, wc[0].Opcode)
			}
		}
		// Receive-side completions and flushes settle asynchronously.
		if r.qa.State() != verbs.StateRTS || r.qb.State() != verbs.StateRTS {
			r.resetRC(t)
		}
		if r.ua.State() != verbs.StateRTS || r.ub.State() != verbs.StateRTS {
			r.resetUD(t)
		}
		r.drain(t)
	})
}

package verbstest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// The equivalence run: one seeded random sequence of operations — READ,
// WRITE, SEND/RECV, CAS, FAA, masked atomics, fenced and unsignaled
// requests, the scratch area, and a few invalid ones (bad rkey, out of
// bounds, misaligned atomic, wrong access, a SEND with no receive) — over
// a few QPs and regions between two devices. Its canonical Trace (every
// completion in order, with what READs and atomics returned, and the
// final image of every region) must be the same on every transport.
//
// It is deterministic by construction: the sequence depends only on the
// seed, never on results; each post list waits for its completions before
// the next is posted; a request whose local source an earlier READ or
// atomic of the same list lands carries FENCE (as correct code must); and
// a QP that an error moved to ERROR is replaced by a fresh connection, so
// most of the operations execute.

// Equivalence sizes.
const (
	// EquivalenceOps is the number of work requests of the sequence.
	EquivalenceOps = 20000
	// EquivalenceSeed seeds the sequence Equivalence runs.
	EquivalenceSeed = 12

	eqQPs      = 3
	eqLocal    = 8192 // the requester's region
	eqStatic   = 2048 // its first bytes are only ever read
	eqRW       = 4096 // the responder's region of every access
	eqAtomics  = 512  // the start of eqRW where atomics go (small values)
	eqRO       = 1024 // the responder's read-only region
	eqRecvSlot = 128
	eqRecvs    = 32
	eqMaxBatch = 8
)

// Trace is the canonical record of one equivalence run.
type Trace struct {
	// Provider names where it ran.
	Provider string
	// Events are the completions in order: requester completions as
	// "q<slot> <wr_id> <status> [<opcode> <byte_len> <data hash>]", the
	// receives they caused as "r<slot> …", and "new q<slot>" where a QP
	// was replaced. The opcode and byte_len are recorded for successful
	// completions only: ibverbs defines them for those alone.
	Events []string
	// Regions are the final images of every region, by name.
	Regions []RegionImage
	// Executed counts requests that completed successfully (signaled or
	// not).
	Executed int
}

// RegionImage is a region's name and final bytes.
type RegionImage struct {
	Name  string
	Bytes []byte
}

// Digest is a hash of the whole trace.
func (tr *Trace) Digest() string {
	h := sha256.New()
	for _, e := range tr.Events {
		h.Write([]byte(e))
		h.Write([]byte{'\n'})
	}
	for _, r := range tr.Regions {
		h.Write([]byte(r.Name))
		h.Write(r.Bytes)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Diff describes the first difference between two traces, or returns ""
// when they are identical.
func (tr *Trace) Diff(other *Trace) string {
	n := min(len(tr.Events), len(other.Events))
	for i := 0; i < n; i++ {
		if tr.Events[i] != other.Events[i] {
			lo := max(0, i-4)
			return fmt.Sprintf("event %d differs: %s has %q, %s has %q\n%s before it:\n  %s", i,
				tr.Provider, tr.Events[i], other.Provider, other.Events[i], tr.Provider, joinLines(tr.Events[lo:i]))
		}
	}
	if len(tr.Events) != len(other.Events) {
		return fmt.Sprintf("%s has %d events, %s %d", tr.Provider, len(tr.Events), other.Provider, len(other.Events))
	}
	for i := range tr.Regions {
		a, b := tr.Regions[i], other.Regions[i]
		if !bytes.Equal(a.Bytes, b.Bytes) {
			for j := range a.Bytes {
				if j >= len(b.Bytes) || a.Bytes[j] != b.Bytes[j] {
					return fmt.Sprintf("region %s differs first at byte %d", a.Name, j)
				}
			}
			return fmt.Sprintf("region %s differs in length", a.Name)
		}
	}
	return ""
}

func joinLines(ls []string) string {
	var b bytes.Buffer
	for i, l := range ls {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

var (
	refMu     sync.Mutex
	refTraces = map[string]*Trace{}
)

// Equivalence runs the equivalence sequence on p and requires its trace
// to be identical to the one on ref (typically the loop fabric), computed
// once per test binary.
func Equivalence(t *testing.T, p, ref Provider) { equivalence(t, p, ref, false) }

// EquivalenceSingleThreaded is Equivalence with the requester's QPs and
// their CQ created SingleThreaded (verbs.QPInitAttr, verbs.CQInitAttr):
// the hints must change nothing a single-threaded application sees. The
// reference runs without them.
func EquivalenceSingleThreaded(t *testing.T, p, ref Provider) { equivalence(t, p, ref, true) }

func equivalence(t *testing.T, p, ref Provider, single bool) {
	refMu.Lock()
	want := refTraces[ref.Name()]
	if want == nil {
		want = RunEquivalence(t, ref, EquivalenceSeed, EquivalenceOps)
		refTraces[ref.Name()] = want
	}
	refMu.Unlock()
	got := runEquivalence(t, p, EquivalenceSeed, EquivalenceOps, single)
	if d := want.Diff(got); d != "" {
		t.Fatalf("%s and %s disagree on the equivalence sequence (seed %d): %s", ref.Name(), p.Name(), EquivalenceSeed, d)
	}
	if got.Executed < EquivalenceOps*3/4 {
		t.Fatalf("only %d of %d operations executed", got.Executed, EquivalenceOps)
	}
	t.Logf("%s: %d events, %d operations executed, digest %s", p.Name(), len(got.Events), got.Executed, got.Digest())
}

// RunEquivalence runs the sequence of the given seed and length on two
// devices of p and returns its trace.
func RunEquivalence(t testing.TB, p Provider, seed uint64, ops int) *Trace {
	t.Helper()
	return runEquivalence(t, p, seed, ops, false)
}

func runEquivalence(t testing.TB, p Provider, seed uint64, ops int, single bool) *Trace {
	t.Helper()
	r := newEqRun(t, p, seed, single)
	for r.posted < ops {
		r.batch(t, min(1+r.rng.IntN(eqMaxBatch), ops-r.posted))
	}
	r.tr.Regions = []RegionImage{
		{"local", bytes.Clone(r.local.Bytes())},
		{"rw", bytes.Clone(r.rw.Bytes())},
		{"ro", bytes.Clone(r.ro.Bytes())},
		{"recv", bytes.Clone(r.recv.Bytes())},
	}
	return r.tr
}

// eqConn is one QP slot: its current connection.
type eqConn struct {
	qa, qb verbs.QP
	scq    verbs.CQ // qa's CQ, kept across connections
	rcq    verbs.CQ // qb's CQ, one per connection
	fresh  bool
}

type eqRun struct {
	rng          *rand.Rand
	a, b         *node
	local        verbs.MR
	rw, ro, recv verbs.MR
	conns        [eqQPs]eqConn
	posted       int
	single       bool // the requester side is SingleThreaded
	nextID       uint64
	recvSeq      int
	tr           *Trace
	maxInline    int
	wrs          []verbs.SendWR
	sges         []verbs.SGE
	pend         [][2]int // local ranges an earlier READ or atomic of the batch lands
	outs         []eqOut
	recvWRs      []verbs.RecvWR
	wcs          []verbs.WC
	maskedSizes  uint32
}

// eqOut is what a request's completion should record: the local bytes a
// READ or atomic landed.
type eqOut struct {
	off, n int
}

func newEqRun(t testing.TB, p Provider, seed uint64, single bool) *eqRun {
	t.Helper()
	nodes := openNodes(t, p, 2)
	r := &eqRun{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		a:   nodes[0], b: nodes[1],
		tr:     &Trace{Provider: p.Name()},
		nextID: 1,
		single: single,
	}
	r.local = r.a.mr(t, eqLocal, verbs.AccessAll)
	r.rw = r.b.mr(t, eqRW, verbs.AccessAll)
	r.ro = r.b.mr(t, eqRO, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	r.recv = r.b.mr(t, eqRecvSlot*eqRecvs, verbs.AccessLocalWrite)
	init := rand.New(rand.NewPCG(seed+1, seed+2))
	for _, m := range []verbs.MR{r.local, r.rw, r.ro} {
		b := m.Bytes()
		for i := range b {
			b[i] = byte(init.Uint32())
		}
	}
	for off := 0; off < eqAtomics; off += 8 {
		put64(r.rw.Bytes(), off, uint64(init.IntN(4)))
	}
	r.maxInline = min(r.a.dev.Attr().MaxInlineData, 64) // 64: the default QPCap.MaxInlineData
	r.maskedSizes = r.a.dev.Attr().MaskedAtomicSizes & r.b.dev.Attr().MaskedAtomicSizes
	for i := range r.conns {
		if single {
			cq, err := verbs.CreateCQEx(r.a.dev, verbs.CQInitAttr{Depth: 64, SingleThreaded: true})
			must(t, err)
			r.conns[i].scq = cq
		} else {
			r.conns[i].scq = r.a.newCQ(t, 64)
		}
		r.reconnect(t, i)
	}
	return r
}

// reconnect replaces slot i's connection with a new pair of QPs.
func (r *eqRun) reconnect(t testing.TB, i int) {
	t.Helper()
	c := &r.conns[i]
	if c.qa != nil {
		must(t, c.qa.Destroy())
		must(t, c.qb.Destroy())
		must(t, c.rcq.Destroy())
	}
	c.rcq = r.b.newCQ(t, 64)
	c.qa = r.a.qp(t, qpOpts{cq: c.scq, single: r.single})
	c.qb = r.b.qp(t, qpOpts{cq: c.rcq})
	connect(t, c.qa, r.b.dev, c.qb.QPN(), connOpts{access: verbs.AccessAll, rnrRetry: verbs.NoRNRRetry})
	connect(t, c.qb, r.a.dev, c.qa.QPN(), connOpts{access: verbs.AccessAll})
	c.fresh = true
}

// batch posts one post list of n requests on a random QP, waits for its
// completions and records them.
func (r *eqRun) batch(t testing.TB, n int) {
	t.Helper()
	slot := r.rng.IntN(eqQPs)
	c := &r.conns[slot]
	if c.fresh {
		r.tr.Events = append(r.tr.Events, fmt.Sprintf("new q%d", slot))
		c.fresh = false
	}
	r.wrs, r.sges, r.pend, r.outs, r.recvWRs = r.wrs[:0], r.sges[:0], r.pend[:0], r.outs[:0], r.recvWRs[:0]
	noRecv := false // a SEND of this batch finds no receive: no more receives after it
	for i := 0; i < n; i++ {
		wr, out := r.gen()
		if wr.Opcode == verbs.OpSend || wr.Opcode == verbs.OpSendWithImm {
			if !noRecv && r.rng.IntN(300) == 0 {
				noRecv = true
			}
			if !noRecv {
				s := r.recvSeq % eqRecvs
				r.recvSeq++
				r.recvWRs = append(r.recvWRs, verbs.RecvWR{ID: uint64(1000000 + s), SGL: []verbs.SGE{sg(r.recv, s*eqRecvSlot, eqRecvSlot)}})
			}
		}
		if i < n-1 && r.rng.IntN(7) == 0 {
			wr.Flags &^= verbs.FlagSignaled
		}
		r.wrs = append(r.wrs, wr)
		r.outs = append(r.outs, out)
	}
	if len(r.recvWRs) > 0 {
		must(t, c.qb.PostRecv(r.recvWRs))
	}
	if err := c.qa.PostSend(r.wrs); err != nil {
		t.Fatalf("%s: PostSend of %d: %v", r.tr.Provider, len(r.wrs), err)
	}
	first := r.wrs[0].ID
	last := r.wrs[len(r.wrs)-1].ID
	r.posted += len(r.wrs)
	wcs := r.waitFor(t, c.scq, last)
	failed, sends := false, 0
	for _, wc := range wcs {
		k := int(wc.ID - first)
		if k < 0 || k >= len(r.wrs) {
			t.Fatalf("%s: completion of wr_id %d outside the batch %d…%d", r.tr.Provider, wc.ID, first, last)
		}
		if wc.Status != verbs.StatusSuccess {
			failed = true
			r.tr.Events = append(r.tr.Events, fmt.Sprintf("q%d %d %v", slot, wc.ID, wc.Status))
			continue
		}
		o := r.outs[k]
		h := uint64(0)
		if o.n > 0 {
			h = hash(r.local.Bytes()[o.off : o.off+o.n])
		}
		r.tr.Events = append(r.tr.Events, fmt.Sprintf("q%d %d %v %v %d %016x", slot, wc.ID, wc.Status, wc.Opcode, wc.ByteLen, h))
	}
	// Requests before the first error (or all) executed; count the
	// SENDs among them for the receives to expect.
	for _, wr := range r.wrs {
		if failedAt(wcs, wr.ID) {
			break
		}
		r.tr.Executed++
		if wr.Opcode == verbs.OpSend || wr.Opcode == verbs.OpSendWithImm {
			sends++
		}
	}
	if sends > 0 {
		for _, wc := range waitN(t, c.rcq, sends) {
			s := int(wc.ID - 1000000)
			e := fmt.Sprintf("r%d %d %v", slot, wc.ID, wc.Status)
			if wc.Status == verbs.StatusSuccess && s >= 0 && s < eqRecvs {
				imm := uint32(0)
				if wc.Flags&verbs.WCWithImm != 0 {
					imm = wc.Imm
				}
				e += fmt.Sprintf(" %v %d imm=%d %016x", wc.Opcode, wc.ByteLen, imm, hash(r.recv.Bytes()[s*eqRecvSlot:s*eqRecvSlot+int(min(wc.ByteLen, eqRecvSlot))]))
			}
			r.tr.Events = append(r.tr.Events, e)
		}
	}
	if failed {
		r.reconnect(t, slot)
	}
}

// failedAt reports whether the completion of id in wcs is an error.
func failedAt(wcs []verbs.WC, id uint64) bool {
	for _, wc := range wcs {
		if wc.ID == id {
			return wc.Status != verbs.StatusSuccess
		}
	}
	return false // unsignaled and successful
}

// waitFor polls cq until the completion of wr_id last arrives and returns
// every completion up to it.
func (r *eqRun) waitFor(t testing.TB, cq verbs.CQ, last uint64) []verbs.WC {
	t.Helper()
	r.wcs = r.wcs[:0]
	var buf [eqMaxBatch]verbs.WC
	deadline := time.Now().Add(WaitTimeout)
	for idle := 0; ; {
		k, err := cq.Poll(buf[:])
		if err != nil {
			t.Fatalf("%s: Poll: %v", r.tr.Provider, err)
		}
		r.wcs = append(r.wcs, buf[:k]...)
		if k > 0 && buf[k-1].ID == last {
			return r.wcs
		}
		if k > 0 {
			idle = 0
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no completion of wr_id %d after %v; got %s", r.tr.Provider, last, WaitTimeout, fmtWCs(r.wcs))
		}
		if idle++; idle < 64 {
			continue
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func hash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// gen draws the next request of the batch.
func (r *eqRun) gen() (verbs.SendWR, eqOut) {
	id := r.nextID
	r.nextID++
	wr := verbs.SendWR{ID: id, Flags: verbs.FlagSignaled}
	if r.rng.IntN(20) == 0 {
		wr.Flags |= verbs.FlagFence
	}
	if r.rng.IntN(80) == 0 {
		return r.invalid(wr), eqOut{}
	}
	switch k := r.rng.IntN(100); {
	case k < 24:
		return r.read(wr)
	case k < 48:
		return r.write(wr), eqOut{}
	case k < 60:
		wr.Opcode = verbs.OpSend
		if r.rng.IntN(2) == 0 {
			wr.Opcode, wr.Imm = verbs.OpSendWithImm, r.rng.Uint32()
		}
		r.source(&wr, 1+r.rng.IntN(eqRecvSlot))
		return wr, eqOut{}
	case k < 88:
		return r.atomic(wr, false)
	default:
		return r.atomic(wr, true)
	}
}

// read is a READ of the responder's regions (or scratch area) into a
// local range.
func (r *eqRun) read(wr verbs.SendWR) (verbs.SendWR, eqOut) {
	wr.Opcode = verbs.OpRead
	n := 1 + r.rng.IntN(256)
	switch k := r.rng.IntN(20); {
	case k == 0:
		n = 1 + r.rng.IntN(verbs.ScratchSize)
		wr.RemoteAddr, wr.RKey = verbs.ScratchAddr(r.rng.IntN(verbs.ScratchSize-n+1)), r.rw.RKey()
	case k < 4:
		n = min(n, eqRO)
		wr.RemoteAddr, wr.RKey = r.ro.Addr()+uint64(r.rng.IntN(eqRO-n+1)), r.ro.RKey()
	default:
		wr.RemoteAddr, wr.RKey = r.rw.Addr()+uint64(r.rng.IntN(eqRW-n+1)), r.rw.RKey()
	}
	off := r.dest(&wr, n)
	return wr, eqOut{off: off, n: n}
}

// write is a WRITE of a local range into the responder's region or
// scratch area.
func (r *eqRun) write(wr verbs.SendWR) verbs.SendWR {
	wr.Opcode = verbs.OpWrite
	n := 1 + r.rng.IntN(256)
	if r.rng.IntN(20) == 0 {
		n = 1 + r.rng.IntN(verbs.ScratchSize)
		wr.RemoteAddr, wr.RKey = verbs.ScratchAddr(r.rng.IntN(verbs.ScratchSize-n+1)), r.rw.RKey()
	} else {
		if r.rng.IntN(4) == 0 {
			n = 8 // an aligned word: single-copy atomic
			wr.RemoteAddr = r.rw.Addr() + uint64(8*r.rng.IntN(eqRW/8))
		} else {
			wr.RemoteAddr = r.rw.Addr() + uint64(r.rng.IntN(eqRW-n+1))
		}
		wr.RKey = r.rw.RKey()
	}
	r.source(&wr, n)
	return wr
}

// atomic is a CAS or FAA, plain or masked, on the atomics area.
func (r *eqRun) atomic(wr verbs.SendWR, masked bool) (verbs.SendWR, eqOut) {
	size := 8
	if masked {
		for {
			size = 8 << r.rng.IntN(3)
			if r.maskedSizes&uint32(size) != 0 {
				break
			}
		}
	}
	cmp := r.rng.IntN(2) == 0
	switch {
	case cmp && masked:
		wr.Opcode = verbs.OpMaskedCmpAndSwp
	case masked:
		wr.Opcode = verbs.OpMaskedFetchAndAdd
	case cmp:
		wr.Opcode = verbs.OpAtomicCmpAndSwp
	default:
		wr.Opcode = verbs.OpAtomicFetchAndAdd
	}
	wr.RemoteAddr, wr.RKey = r.rw.Addr()+uint64(size*r.rng.IntN(eqAtomics/size)), r.rw.RKey()
	a := &wr.Atomic
	if masked {
		a.Size = uint8(size)
	}
	for i := 0; i < size/8; i++ {
		a.Compare[i], a.Swap[i] = uint64(r.rng.IntN(4)), uint64(r.rng.IntN(4))
		a.CompareMask[i], a.SwapMask[i] = ^uint64(0), ^uint64(0)
		if r.rng.IntN(3) == 0 {
			a.CompareMask[i], a.SwapMask[i] = r.rng.Uint64(), r.rng.Uint64()
		}
	}
	off := r.destAligned(&wr, size)
	return wr, eqOut{off: off, n: size}
}

// invalid is a request the responder must refuse.
func (r *eqRun) invalid(wr verbs.SendWR) verbs.SendWR {
	switch r.rng.IntN(6) {
	case 0: // bad rkey
		wr = r.write(wr)
		wr.RKey ^= 0x40000001
	case 1:
		wr, _ = r.read(wr)
		wr.RKey ^= 0x40000001
	case 2: // out of bounds
		wr, _ = r.read(wr)
		wr.RKey, wr.RemoteAddr = r.rw.RKey(), r.rw.Addr()+eqRW-uint64(r.rng.IntN(int(wr.Length())))
	case 3: // misaligned atomic
		wr, _ = r.atomic(wr, r.rng.IntN(2) == 0)
		wr.RemoteAddr += 4
	case 4: // wrong access: a WRITE or atomic on the read-only region
		if r.rng.IntN(2) == 0 {
			wr = r.write(wr)
		} else {
			wr, _ = r.atomic(wr, false)
		}
		wr.RKey, wr.RemoteAddr = r.ro.RKey(), r.ro.Addr()+8*uint64(r.rng.IntN(8))
	default: // masked atomic, bad rkey
		wr, _ = r.atomic(wr, true)
		wr.RKey ^= 0x40000001
	}
	return wr
}

// dest sets a local destination of n bytes, split in up to two entries,
// and notes it as pending for the rest of the batch.
func (r *eqRun) dest(wr *verbs.SendWR, n int) int {
	off := eqStatic + r.rng.IntN(eqLocal-eqStatic-n+1)
	r.sgl(wr, off, n)
	r.pend = append(r.pend, [2]int{off, off + n})
	return off
}

// destAligned sets an aligned local destination of size bytes.
func (r *eqRun) destAligned(wr *verbs.SendWR, size int) int {
	off := eqStatic + size*r.rng.IntN((eqLocal-eqStatic)/size)
	r.sges = append(r.sges, sg(r.local, off, size))
	wr.SGL = r.sges[len(r.sges)-1:]
	r.pend = append(r.pend, [2]int{off, off + size})
	return off
}

// source sets a local source of n bytes: from the static part (sometimes
// INLINE) or anywhere, then FENCEd if an earlier READ or atomic of the
// batch lands there.
func (r *eqRun) source(wr *verbs.SendWR, n int) {
	if r.rng.IntN(2) == 0 {
		off := r.rng.IntN(eqStatic - n + 1)
		r.sgl(wr, off, n)
		if n <= r.maxInline && r.rng.IntN(3) == 0 {
			wr.Flags |= verbs.FlagInline
		}
		return
	}
	off := r.rng.IntN(eqLocal - n + 1)
	r.sgl(wr, off, n)
	for _, p := range r.pend {
		if off < p[1] && p[0] < off+n {
			wr.Flags |= verbs.FlagFence
		}
	}
}

// sgl sets the scatter/gather list for local bytes [off, off+n), in one
// or two entries.
func (r *eqRun) sgl(wr *verbs.SendWR, off, n int) {
	start := len(r.sges)
	if n > 1 && r.rng.IntN(3) == 0 {
		h := 1 + r.rng.IntN(n-1)
		r.sges = append(r.sges, sg(r.local, off, h), sg(r.local, off+h, n-h))
	} else {
		r.sges = append(r.sges, sg(r.local, off, n))
	}
	wr.SGL = r.sges[start:len(r.sges):len(r.sges)]
}

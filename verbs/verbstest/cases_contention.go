package verbstest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

// worker is a requester with its own CQ, QP and 4 KiB local region,
// connected to a shared responder QP of its own on the target node.
type worker struct {
	cq verbs.CQ
	qp verbs.QP
	mr verbs.MR
}

// workers connects n workers, spread over the client nodes, to target.
func workers(t testing.TB, clients []*node, target *node, n int) []*worker {
	t.Helper()
	ws := make([]*worker, n)
	for i := range ws {
		c := clients[i%len(clients)]
		cq := c.newCQ(t, 256)
		qa := c.qp(t, qpOpts{cq: cq})
		qb := target.qp(t, qpOpts{})
		connect(t, qa, target.dev, qb.QPN(), connOpts{access: verbs.AccessAll})
		connect(t, qb, c.dev, qa.QPN(), connOpts{access: verbs.AccessAll})
		ws[i] = &worker{cq: cq, qp: qa, mr: c.mr(t, 4096, verbs.AccessAll)}
	}
	return ws
}

// do posts one signaled request and waits for its successful completion.
func (w *worker) do(wr verbs.SendWR) error {
	if err := w.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		return err
	}
	wcs, err := pollN(w.cq, 1)
	if err != nil {
		return err
	}
	if wcs[0].Status != verbs.StatusSuccess || wcs[0].ID != wr.ID {
		return fmt.Errorf("completion %s, want id %d success", fmtWCs(wcs), wr.ID)
	}
	return nil
}

// runWorkers runs f for each worker on its own goroutine and reports the
// first error.
func runWorkers(t *testing.T, ws []*worker, f func(i int, w *worker) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	start := make(chan struct{})
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i, w)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
}

// contentionCases race atomics, READs and WRITEs from several QPs on
// several nodes against the same remote words.
func contentionCases() []Case {
	return []Case{
		serial("ConcurrentFetchAndAdd", func(t *testing.T, p Provider) {
			const nw, per, batch = 4, 400, 8
			ns := openNodes(t, p, 3)
			target := ns[2]
			m := target.mr(t, 64, verbs.AccessAll)
			ws := workers(t, ns[:2], target, nw)
			seen := make([][]uint64, nw)
			runWorkers(t, ws, func(i int, w *worker) error {
				for k := 0; k < per; k += batch {
					list := make([]verbs.SendWR, batch)
					for j := range list {
						list[j] = faa(uint64(k+j), m, 8, sg(w.mr, 8*j, 8), 1)
					}
					if err := w.qp.PostSend(list); err != nil {
						return err
					}
					wcs, err := pollN(w.cq, batch)
					if err != nil {
						return err
					}
					for j, wc := range wcs {
						if wc.Status != verbs.StatusSuccess || wc.ID != uint64(k+j) {
							return fmt.Errorf("completion %s", fmtWCs(wcs))
						}
						seen[i] = append(seen[i], u64(w.mr.Bytes(), 8*j))
					}
				}
				return nil
			})
			if got := u64(m.Bytes(), 8); got != nw*per {
				t.Fatalf("counter %d after %d×%d FAAs, want %d", got, nw, per, nw*per)
			}
			// Every original value 0 … N-1 was returned exactly once.
			all := make([]bool, nw*per)
			for _, s := range seen {
				for _, v := range s {
					if v >= nw*per || all[v] {
						t.Fatalf("FAA returned %d twice or out of range", v)
					}
					all[v] = true
				}
			}
		}),
		serial("CASSpinLock", func(t *testing.T, p Provider) {
			const nw, per = 4, 60
			ns := openNodes(t, p, 3)
			target := ns[2]
			m := target.mr(t, 128, verbs.AccessAll)
			ws := workers(t, ns[:2], target, nw)
			const lock, counter = 0, 64
			runWorkers(t, ws, func(i int, w *worker) error {
				me := uint64(i + 1)
				b := w.mr.Bytes()
				id := uint64(0)
				for range per {
					for { // acquire
						id++
						if err := w.do(cas(id, m, lock, sg(w.mr, 0, 8), 0, me)); err != nil {
							return err
						}
						if u64(b, 0) == 0 {
							break
						}
					}
					// Critical section: a non-atomic read-modify-write.
					id++
					if err := w.do(rdma(id, verbs.OpRead, m, counter, sg(w.mr, 8, 8))); err != nil {
						return err
					}
					put64(b, 16, u64(b, 8)+1)
					id++
					if err := w.do(rdma(id, verbs.OpWrite, m, counter, sg(w.mr, 16, 8))); err != nil {
						return err
					}
					id++
					if err := w.do(cas(id, m, lock, sg(w.mr, 24, 8), me, 0)); err != nil {
						return err
					}
					if got := u64(b, 24); got != me {
						return fmt.Errorf("released a lock held by %d, not by me (%d)", got, me)
					}
				}
				return nil
			})
			if got := u64(m.Bytes(), counter); got != nw*per {
				t.Fatalf("counter %d after %d×%d locked increments, want %d: mutual exclusion failed", got, nw, per, nw*per)
			}
		}),
		serial("MixedSizeAtomicsOverlap", func(t *testing.T, p Provider) {
			// Words 0..3 form a 32-byte block. Masked 32-byte CASes (full
			// compare and swap masks) increment words 0 and 2, set word 1 to
			// ^word0 and keep word 3; 8-byte CASes and FAAs increment word 2
			// alone. Requests go in post lists of
			// chained operands; a CAS succeeded iff it returned its compare
			// operand. If the two sizes were not atomic with respect to each
			// other, an 8-byte update landing inside a 32-byte CAS would be
			// overwritten (word 2 falls short) or the block would tear.
			const nw, batches, batch = 4, 500, 8
			ns := openNodes(t, p, 3)
			target := ns[2]
			if target.dev.Attr().MaskedAtomicSizes&32 == 0 {
				t.Skip("device has no 32-byte masked atomics")
			}
			m := target.mr(t, 64, verbs.AccessAll)
			setWords(m.Bytes(), 0, 4, [4]uint64{0, ones, 0, 0x5555})
			ws := workers(t, ns[:2], target, nw)
			wins := make([]uint64, nw)
			full := [4]uint64{ones, ones, ones, ones}
			runWorkers(t, ws, func(i int, w *worker) error {
				b := w.mr.Bytes()
				cur := [4]uint64{0, ones, 0, 0x5555}
				list := make([]verbs.SendWR, batch)
				for k := range batches {
					for j := range list {
						id := uint64(k*batch + j)
						c := cur
						c[0] += uint64(j)
						c[1] = ^c[0]
						switch i % 4 {
						case 0, 2:
							a := verbs.AtomicArgs{Size: 32, Op: verbs.CmpEqual, Compare: c, CompareMask: full,
								Swap: [4]uint64{c[0] + 1, ^(c[0] + 1), c[2] + 1, c[3]}, SwapMask: full}
							list[j] = masked(id, verbs.OpMaskedCmpAndSwp, m, 0, sg(w.mr, 32*j, 32), a)
						case 1:
							list[j] = cas(id, m, 16, sg(w.mr, 32*j, 8), cur[2]+uint64(j), cur[2]+uint64(j)+1)
						case 3:
							list[j] = faa(id, m, 16, sg(w.mr, 32*j, 8), 1)
						}
					}
					if err := w.qp.PostSend(list); err != nil {
						return err
					}
					wcs, err := pollN(w.cq, batch)
					if err != nil {
						return err
					}
					for j, wc := range wcs {
						if wc.Status != verbs.StatusSuccess || wc.ID != list[j].ID {
							return fmt.Errorf("completion %s", fmtWCs(wcs))
						}
						switch i % 4 {
						case 0, 2:
							orig := words(b, 32*j, 4)
							if orig[1] != ^orig[0] || orig[3] != 0x5555 {
								return fmt.Errorf("torn block %x", orig)
							}
							if orig == list[j].Atomic.Compare {
								wins[i]++
								cur = list[j].Atomic.Swap
							} else {
								cur = orig
							}
						case 1:
							orig := u64(b, 32*j)
							if orig == list[j].Atomic.Compare[0] {
								wins[i]++
								cur[2] = orig + 1
							} else {
								cur[2] = orig
							}
						case 3:
							wins[i]++
						}
					}
				}
				return nil
			})
			big, small := wins[0]+wins[2], wins[1]+wins[3]
			got := words(m.Bytes(), 0, 4)
			if got[0] != big || got[1] != ^big || got[2] != big+small || got[3] != 0x5555 {
				t.Fatalf("block %x after %d 32-byte CASes and %d 8-byte CASes/FAAs succeeded; want [%x %x %x 5555]", got, big, small, big, ^big, big+small)
			}
			if big == 0 || small == 0 {
				t.Fatalf("no interleaving: successes per worker %v (32-byte %d, 8-byte %d)", wins, big, small)
			}
		}),
		serial("AlignedWritesDoNotTear", func(t *testing.T, p Provider) {
			const nw, per = 4, 400
			const pattern = 0x0101010101010101
			ns := openNodes(t, p, 3)
			target := ns[2]
			m := target.mr(t, 64, verbs.AccessAll)
			put64(m.Bytes(), 8, pattern)
			ws := workers(t, ns[:2], target, nw)
			runWorkers(t, ws, func(i int, w *worker) error {
				b := w.mr.Bytes()
				for k := range per {
					if i%2 == 0 { // writer
						put64(b, 0, pattern*uint64(1+(k*7+i)%255))
						if err := w.do(rdma(uint64(k), verbs.OpWrite, m, 8, sg(w.mr, 0, 8))); err != nil {
							return err
						}
						continue
					}
					if err := w.do(rdma(uint64(k), verbs.OpRead, m, 8, sg(w.mr, 0, 8))); err != nil {
						return err
					}
					if v := u64(b, 0); v%pattern != 0 || v == 0 {
						return fmt.Errorf("READ saw torn value %#x", v)
					}
				}
				return nil
			})
		}),
	}
}

package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/prism"
	_ "github.com/rdmakit/rdmakit/transport/loop" // the transports measured
	_ "github.com/rdmakit/rdmakit/transport/shm"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	Register(Experiment{
		Name: "prism-ops",
		Description: "PRISM's operations next to the plain operations they replace, per transport (loop, tcp, shm): " +
			"indirect READ vs two dependent READs, the ALLOCATE+CAS chain vs three dependent round trips, enhanced CAS",
		Run: runPrismOps,
	})
}

var prismColumns = []Column{
	{Name: "transport"}, {Name: "step"}, {Name: "op"}, {Name: "round_trips"},
	{Name: "p50", Unit: "µs"}, {Name: "avg", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "ratio", Unit: "×"}, {Name: "ratio_of"},
}

// prismBench is a client QP connected to a server device with a PRISM
// pool region: an item, a slot pointing at it, a bounded slot, and the
// slot the install chains replace.
type prismBench struct {
	server, client verbs.Device
	cq             verbs.CQ
	qp             verbs.QP
	pool           *prism.Pool
	region         verbs.MR
	buf            verbs.MR
	wrs            []verbs.SendWR
	wc             []verbs.WC
	sgl            [1]verbs.SGE // the scatter list of plain requests
	ctx            context.Context
	item, slot     uint64 // addresses in region
	bslot, islot   uint64
	queue          uint32
	poll           verbs.PollPolicy
}

var prismSeq atomic.Int64

func prismURI(transport, name string) string {
	switch transport {
	case "tcp":
		return "tcp://127.0.0.1:0"
	case "shm":
		return fmt.Sprintf("shm://prism-%d-%d-%s", os.Getpid(), prismSeq.Add(1), name)
	}
	return fmt.Sprintf("loop://prism-%d/%s", prismSeq.Add(1)/2, name)
}

func newPrismBench(transport string, poll verbs.PollPolicy) (*prismBench, error) {
	b := &prismBench{poll: poll, wrs: make([]verbs.SendWR, 4), wc: make([]verbs.WC, 4), ctx: context.Background()}
	var err error
	fabric := fmt.Sprintf("prism-%d", prismSeq.Add(1))
	uri := func(name string) string {
		if transport == "loop" {
			return "loop://" + fabric + "/" + name
		}
		return prismURI(transport, name)
	}
	if b.server, err = verbs.Open(uri("server")); err != nil {
		return nil, err
	}
	if b.client, err = verbs.Open(uri("client")); err != nil {
		b.server.Close()
		return nil, err
	}
	fail := func(err error) (*prismBench, error) {
		b.close()
		return nil, err
	}
	spd, _ := b.server.AllocPD()
	cpd, _ := b.client.AllocPD()
	scq, err := b.server.CreateCQ(64)
	if err != nil {
		return fail(err)
	}
	if b.cq, err = b.client.CreateCQ(64); err != nil {
		return fail(err)
	}
	sqp, err := spd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: scq, RecvCQ: scq})
	if err != nil {
		return fail(err)
	}
	if b.qp, err = cpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: b.cq, RecvCQ: b.cq}); err != nil {
		return fail(err)
	}
	if err := verbs.ConnectRC(b.qp, verbs.AccessAll, b.server.Address(), sqp.QPN()); err != nil {
		return fail(err)
	}
	if err := verbs.ConnectRC(sqp, verbs.AccessAll, b.client.Address(), b.qp.QPN()); err != nil {
		return fail(err)
	}
	if b.region, err = spd.AllocMR(1<<20, verbs.AccessAll); err != nil {
		return fail(err)
	}
	if b.buf, err = cpd.AllocMR(8192, verbs.AccessAll); err != nil {
		return fail(err)
	}
	if b.pool, err = prism.NewPool(b.region, prism.PoolConfig{MinSize: 64, MaxSize: 64, Stock: 256}); err != nil {
		return fail(err)
	}
	b.queue, _, _ = b.pool.Class(64)
	// The fixed objects live at the region's end, past the pool's stock.
	mem := b.region.Bytes()
	end := uint64(b.region.Len())
	b.item, b.slot, b.bslot, b.islot = b.region.Addr()+end-512, b.region.Addr()+end-256, b.region.Addr()+end-192, b.region.Addr()+end-128
	for i := 0; i < 64; i++ {
		mem[end-512+uint64(i)] = byte(i)
	}
	binary.NativeEndian.PutUint64(mem[end-256:], b.item)
	binary.NativeEndian.PutUint64(mem[end-192:], b.item)
	binary.NativeEndian.PutUint64(mem[end-184:], 64)
	binary.NativeEndian.PutUint64(mem[end-128:], b.item)
	if transport == "shm" {
		// One-sided operations run in this process once the region is mapped.
		for deadline := time.Now().Add(5 * time.Second); ; {
			if err := b.read(b.item, 8); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fail(errors.New("prism-ops: the shm region never became readable"))
			}
			time.Sleep(time.Millisecond)
		}
	}
	return b, nil
}

func (b *prismBench) close() {
	if b.client != nil {
		b.client.Close()
	}
	if b.server != nil {
		b.server.Close()
	}
}

func (b *prismBench) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: b.buf.Addr() + uint64(off), Length: uint32(n), LKey: b.buf.LKey()}
}

// run posts wrs and waits for the one signaled completion.
func (b *prismBench) run(wrs []verbs.SendWR) (verbs.WC, error) {
	if err := b.qp.PostSend(wrs); err != nil {
		return verbs.WC{}, err
	}
	n, err := verbs.PollWait(b.ctx, b.cq, b.wc[:1], b.poll)
	if err != nil || n != 1 {
		return verbs.WC{}, fmt.Errorf("poll: %d completions, %v", n, err)
	}
	if b.wc[0].Status != verbs.StatusSuccess {
		return b.wc[0], fmt.Errorf("completion %v", b.wc[0].Status)
	}
	return b.wc[0], nil
}

func (b *prismBench) one(w verbs.SendWR) (verbs.WC, error) {
	w.Flags |= verbs.FlagSignaled
	b.wrs[0] = w
	return b.run(b.wrs[:1])
}

func (b *prismBench) read(addr uint64, n int) error {
	b.sgl[0] = b.sge(0, n)
	_, err := b.one(verbs.SendWR{Opcode: verbs.OpRead, SGL: b.sgl[:], RemoteAddr: addr, RKey: b.region.RKey()})
	return err
}

// replaced returns the slot the chains replace, freeing the item it
// replaced (untimed bookkeeping of the server).
func (b *prismBench) replaced(old uint64, n *int) (uint64, error) {
	cur := binary.NativeEndian.Uint64(b.region.Bytes()[b.islot-b.region.Addr():])
	if old != b.item && old != cur {
		if err := b.pool.Free(b.queue, old); err != nil {
			return cur, err
		}
		if *n++; *n%64 == 0 {
			if _, err := b.pool.Reclaim(); err != nil {
				return cur, err
			}
		}
	}
	return cur, nil
}

type prismOp struct {
	name  string
	trips int
	run   func() error
}

func runPrismOps(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(time.Second, 100*time.Millisecond)
	r := &Result{
		Name:    "prism-ops",
		Title:   "PRISM operations vs the plain operations they replace, per transport",
		Columns: prismColumns,
		Plots:   []Plot{{Title: "median latency of each operation", X: "step", Y: "p50", Series: []string{"transport"}, LogY: true}},
	}
	transports := []string{"loop", "tcp", "shm"}
	bar := env.Progress(len(transports)*8, time.Duration(len(transports)*8)*point, "prism-ops")
	defer bar.Finish()
	for _, tr := range transports {
		b, err := newPrismBench(tr, env.Poll)
		if err != nil {
			return nil, fmt.Errorf("prism-ops over %s: %w", tr, err)
		}
		rows, err := measurePrism(ctx, b, point, bar)
		b.close()
		if err != nil {
			return nil, fmt.Errorf("prism-ops over %s: %w", tr, err)
		}
		for i, row := range rows {
			r.AddRow(tr, i+1, row.name, row.trips, us(row.s.P50), us(row.s.Avg), us(row.s.P99), row.ratio, row.ratioOf)
		}
		if r.Meta.Transport != "" {
			r.Meta.Transport += ", "
		}
		r.Meta.Transport += tr
	}
	r.Notes = append(r.Notes,
		"Each transport runs a server device and a client device in this process: loop executes on the client's goroutine, tcp crosses a real TCP connection to the server's soft NIC, shm crosses separate mappings of shared memory (plain and indirect READs run in the client's process; ALLOCATE and the chain go through the connection's rings).",
		"One operation (or dependent sequence) at a time, post to polled completion, timed with the clock around each; p50/avg/p99 over the run.",
		"two dependent READs: READ the 8-byte slot, then READ the 64-byte item it points to — what an indirect READ replaces. ALLOCATE, WRITE, CAS: three dependent round trips (ALLOCATE a buffer and learn its address, WRITE the item, CAS it into the slot) — what the one-list ALLOCATE→REDIRECT, CONDITIONAL CAS with INDIRECT_ARG chain replaces.",
		"ratio: indirect READ p50 / two dependent READs p50; chain p50 / three round trips p50; on shm also indirect READ p50 / plain READ p50; enhanced CAS p50 / plain CAS p50.",
		fmt.Sprintf("Each point ran %v.", point),
	)
	return r, nil
}

type prismRow struct {
	name, ratioOf string
	trips         int
	s             stats.Summary
	ratio         any
}

func measurePrism(ctx context.Context, b *prismBench, point time.Duration, bar *Progress) ([]prismRow, error) {
	rk := b.region.RKey()
	frees := 0
	old := b.item
	var tag uint64 = 1
	ops := []prismOp{
		{name: "read 64 B", trips: 1, run: func() error { return b.read(b.item, 64) }},
		{name: "two dependent READs (slot, item)", trips: 2, run: func() error {
			if err := b.read(b.slot, 8); err != nil {
				return err
			}
			return b.read(binary.NativeEndian.Uint64(b.buf.Bytes()), 64)
		}},
		{name: "indirect READ 64 B", trips: 1, run: func() error {
			_, err := b.run(prism.IndirectRead(b.wrs, 1, b.sge(0, 64), rk, b.slot, false))
			return err
		}},
		{name: "bounded indirect READ (asks 1 KiB, gets 64 B)", trips: 1, run: func() error {
			_, err := b.run(prism.IndirectRead(b.wrs, 1, b.sge(0, 1024), rk, b.bslot, true))
			return err
		}},
		{name: "ALLOCATE, WRITE, CAS (3 round trips)", trips: 3, run: func() error {
			b.sgl[0] = b.sge(256, 8)
			wc, err := b.one(verbs.SendWR{Opcode: verbs.OpAllocate, SGL: b.sgl[:], RKey: rk, Queue: b.queue})
			if err != nil {
				return err
			}
			addr := wc.Result
			b.sgl[0] = b.sge(512, 64)
			if _, err := b.one(verbs.SendWR{Opcode: verbs.OpWrite, SGL: b.sgl[:], RemoteAddr: addr, RKey: rk}); err != nil {
				return err
			}
			b.sgl[0] = b.sge(1024, 8)
			c := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: b.sgl[:], RemoteAddr: b.islot, RKey: rk}
			c.Atomic.Compare[0], c.Atomic.Swap[0] = old, addr
			if _, err := b.one(c); err != nil {
				return err
			}
			var err2 error
			old, err2 = b.replaced(old, &frees)
			return err2
		}},
		{name: "ALLOCATE→CAS chain (1 round trip)", trips: 1, run: func() error {
			if _, err := b.run(prism.AllocWriteInstall(b.wrs, 1, b.sge(512, 64), rk, b.queue, b.islot, old, b.sge(1024, 8), 0)); err != nil {
				return err
			}
			if got := binary.NativeEndian.Uint64(b.buf.Bytes()[1024:]); got != old {
				return fmt.Errorf("install lost to nobody: slot held %#x, not %#x", got, old)
			}
			var err error
			old, err = b.replaced(old, &frees)
			return err
		}},
		{name: "CAS 8 B", trips: 1, run: func() error {
			b.sgl[0] = b.sge(2048, 8)
			c := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: b.sgl[:], RemoteAddr: b.item, RKey: rk}
			_, err := b.one(c)
			return err
		}},
		{name: "enhanced CAS 16 B, swap if greater", trips: 1, run: func() error {
			tag++
			_, err := b.run(prism.CASIfGreater(b.wrs, 1, b.sge(2048, 16), rk, b.item+16, 16, [4]uint64{tag, 1}, [4]uint64{^uint64(0)}))
			return err
		}},
	}
	lat := stats.NewLatencies(1 << 20)
	rows := make([]prismRow, 0, len(ops))
	// One deadline per run bounds a stuck operation; a context per
	// operation would cost more than a shared-memory READ.
	opCtx, cancel := context.WithTimeout(ctx, time.Duration(len(ops))*(point+10*time.Second))
	defer cancel()
	b.ctx = opCtx
	for _, op := range ops {
		for i := 0; i < 100; i++ { // warm-up
			if err := op.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
		}
		lat.Reset()
		deadline := time.Now().Add(point)
		for n := 0; ; n++ {
			t0 := time.Now()
			if err := op.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
			t1 := time.Now()
			lat.Record(t1.Sub(t0))
			if n%256 == 0 && (t1.After(deadline) || ctx.Err() != nil) {
				break
			}
		}
		rows = append(rows, prismRow{name: op.name, trips: op.trips, s: lat.Summary()})
		bar.Add(1)
	}
	ratio := func(i, j int, of string) {
		if rows[j].s.P50 > 0 {
			rows[i].ratio = float64(rows[i].s.P50) / float64(rows[j].s.P50)
			rows[i].ratioOf = of
		}
	}
	ratio(2, 1, "p50 / two dependent READs")
	ratio(5, 4, "p50 / three round trips")
	ratio(7, 6, "p50 / CAS 8 B")
	if b.server.Attr().Transport == "shm" {
		rows = append(rows, prismRow{name: "indirect READ 64 B vs plain READ", trips: 1, s: rows[2].s})
		ratio(len(rows)-1, 0, "p50 / read 64 B")
	}
	return rows, nil
}

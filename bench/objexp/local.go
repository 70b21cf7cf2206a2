package objexp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "objstore-local",
		Description: "local object-store clients: create+seal, create+copy+seal and get latency by object size " +
			"(1 KiB to 64 MiB) against one store process: p50, p99, mean",
		Run: runLocal,
	})
}

// localSizes are objstore-local's object sizes: powers of 4.
var localSizes = []int{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}

// The operations objstore-local times.
const (
	opCreateSeal = "create+seal"      // Create, Seal (Release and Delete untimed)
	opPut        = "create+copy+seal" // Plasma's put: Create, copy the bytes in, Seal
	opGet        = "get"              // Get of a sealed object (Release untimed)
)

var localOps = []string{opCreateSeal, opPut, opGet}

var localColumns = []bench.Column{
	{Name: "op"}, {Name: "size", Unit: "B"}, {Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "mean", Unit: "µs"}, {Name: "spread", Unit: "%"}, {Name: "count"},
}

// localSample is one round of one op at one size.
type localSample struct{ p50, p99, mean float64 }

// minOps is the fewest operations a point measures, however slow.
const minOps = 5

func runLocal(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	r := &bench.Result{Name: "objstore-local", Title: "Local object-store clients: create, put and get latency by size",
		Columns: localColumns, Meta: bench.Meta{Transport: "unix socket + shared memory (memfd)"}}
	st, err := startStore(ctx, env, "--mem", "512MiB")
	if err != nil {
		if errors.Is(err, bench.ErrNoCommand) {
			r.Notes = append(r.Notes, errNoCommandNote(err))
			return r, nil
		}
		return nil, err
	}
	defer st.Stop()
	c, err := objstore.Connect(ctx, st.Socket)
	if err != nil {
		return nil, st.Explain(err)
	}
	defer c.Close()

	point := env.PointDuration(500*time.Millisecond, 30*time.Millisecond)
	nRounds := rounds(env.Quick)
	samples := map[string]map[int][]localSample{}
	counts := map[string]map[int]int{}
	for _, op := range localOps {
		samples[op], counts[op] = map[int][]localSample{}, map[int]int{}
	}
	steps := nRounds * len(localSizes) * len(localOps)
	bar := env.Progress(steps, time.Duration(steps)*point*2, "objstore-local")
	defer bar.Finish()
	lat := stats.NewLatencies(1 << 20)
	src := make([]byte, localSizes[len(localSizes)-1])
	for i := range src {
		src[i] = byte(i*31 + 7)
	}
	for range nRounds {
		for _, size := range localSizes {
			for _, op := range localOps {
				bar.Describe(fmt.Sprintf("objstore-local %s %s", op, sizeLabel(size)))
				lat.Reset()
				if err := measureLocal(ctx, c, op, src[:size], point, lat); err != nil {
					return nil, st.Explain(fmt.Errorf("objexp: %s %s: %w", op, sizeLabel(size), err))
				}
				s := lat.Summary()
				samples[op][size] = append(samples[op][size], localSample{us(s.P50), us(s.P99), us(s.Avg)})
				counts[op][size] += s.Count
				bar.Add(1)
			}
		}
	}
	p50 := func(op string, size int) float64 {
		var xs []float64
		for _, s := range samples[op][size] {
			xs = append(xs, s.p50)
		}
		return median(xs)
	}
	for _, op := range localOps {
		for _, size := range localSizes {
			var a, b, m []float64
			for _, s := range samples[op][size] {
				a, b, m = append(a, s.p50), append(b, s.p99), append(m, s.mean)
			}
			r.AddRow(op, size, median(a), median(b), median(m), spread(a), counts[op][size])
		}
	}
	small, large := localSizes[0], localSizes[len(localSizes)-1]
	r.Notes = append(r.Notes,
		fmt.Sprintf("get(%s)/get(%s) p50, same run: %s (target ≤ 2×: a local get maps the store's memory and copies nothing).",
			sizeLabel(large), sizeLabel(small), times(ratio(p50(opGet, large), p50(opGet, small)))),
		fmt.Sprintf("The store is `rdmakit objstore serve --mem 512MiB` in its own process; the client is one goroutine in the experiment's process "+
			"on the store's Unix socket, one call at a time. Each point runs %v (at least %d operations), %d round(s); every figure is the median "+
			"of the rounds and spread is (max−min)/median of p50.", point, minOps, nRounds),
		"create+seal times Create and Seal of a fresh object (its Release and Delete are not timed); create+copy+seal also copies the object's "+
			"bytes in (Plasma's put, which its thesis times as create + memcpy); get times Get of one sealed object, whose Release is not timed.")
	r.Plots = []bench.Plot{{Title: "latency p50 against object size", X: "size", Y: "p50", Series: []string{"op"}, LogX: true, LogY: true}}
	return r, nil
}

// measureLocal times op on objects of len(src) bytes for d (at least
// minOps times) into lat.
func measureLocal(ctx context.Context, c *objstore.Client, op string, src []byte, d time.Duration, lat *stats.Latencies) error {
	if op == opGet {
		return measureGet(ctx, c, src, d, lat)
	}
	until := time.Now().Add(d)
	for n := 0; n < minOps || time.Now().Before(until); n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := object.NewID()
		t0 := time.Now()
		dst, err := c.Create(ctx, id, len(src), nil)
		if err != nil {
			return err
		}
		if op == opPut {
			copy(dst, src)
		}
		if err := c.Seal(ctx, id); err != nil {
			return err
		}
		lat.Record(time.Since(t0))
		if err := c.Release(ctx, id); err != nil {
			return err
		}
		if err := c.Delete(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// measureGet puts one object of src's bytes and times Get of it for d.
func measureGet(ctx context.Context, c *objstore.Client, src []byte, d time.Duration, lat *stats.Latencies) error {
	id := object.NewID()
	dst, err := c.Create(ctx, id, len(src), nil)
	if err != nil {
		return err
	}
	copy(dst, src)
	if err := c.Seal(ctx, id); err != nil {
		return err
	}
	if err := c.Release(ctx, id); err != nil {
		return err
	}
	defer c.Delete(context.WithoutCancel(ctx), id)
	ids := []object.ID{id}
	until := time.Now().Add(d)
	for n := 0; n < minOps || time.Now().Before(until); n++ {
		t0 := time.Now()
		bufs, err := c.Get(ctx, ids, 0)
		if err != nil {
			return err
		}
		lat.Record(time.Since(t0))
		if bufs[0] == nil || len(bufs[0].Data) != len(src) {
			return fmt.Errorf("get returned %v for a sealed object", bufs[0])
		}
		if err := c.Release(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

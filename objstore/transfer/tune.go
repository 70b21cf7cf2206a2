package transfer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// TuneObject is an object a holder has, for Tune to fetch.
type TuneObject struct {
	ID   object.ID
	Size int // dataSize+metaSize
}

// TunePoint is Tune's measurement at one size: the median latency of one
// fetch by each protocol.
type TunePoint struct {
	Size     int
	SendRecv time.Duration
	Read     time.Duration
}

// TuneResult is what Tune measured.
type TuneResult struct {
	// Points are by increasing size.
	Points []TunePoint
	// Runs is the number of timed fetches per size and protocol.
	Runs int
	// Threshold is the crossover: the measured size from which READ is
	// chosen, the cut whose choices lose least against the faster
	// protocol at each size (summed relative excess; see crossover).
	// Found is false when SEND/RECV everywhere loses least; Threshold is
	// then one byte past the largest size.
	Threshold int
	Found     bool
}

// Tune measures, for each object in objs (held by the Server at peer,
// its VerbsAddr), the median latency of fetching it by SEND/RECV and by
// READ over f's pair to peer, runs times each after one warm-up, and
// returns the table and the crossover threshold. Each fetch creates the
// object in sink and aborts it instead of sealing it, so sink is left as
// it was and the same ID can be fetched again; sink must therefore not
// already hold the objects (their Create would fail with ErrExists).
// f needs a verbs device; its Protocol and Threshold are not used.
//
// `rdmakit objstore tune` uses it so: start (or reach) a holder store
// serving a Server, create objects of 1 KiB, 2 KiB, … 1 MiB there, make
// a Fetcher with Config.Device on the fetching store's device, call
// Tune(ctx, fetcher, server.VerbsAddr(), fetchingStoreSink, objs, 20),
// print Points and use Threshold as Config.Threshold.
func Tune(ctx context.Context, f *Fetcher, peer string, sink object.Sink, objs []TuneObject, runs int) (TuneResult, error) {
	if f.cfg.Device == nil {
		return TuneResult{}, fmt.Errorf("%w: Tune needs a fetcher with a verbs device", verbs.ErrInvalidArg)
	}
	if runs <= 0 {
		runs = 1
	}
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b TuneObject) int { return a.Size - b.Size })
	res := TuneResult{Runs: runs}
	scratch := abortingSink{sink}
	times := [2][]time.Duration{make([]time.Duration, runs), make([]time.Duration, runs)}
	for _, o := range objs {
		pt := TunePoint{Size: o.Size}
		// The protocols alternate fetch by fetch, so a slow moment of the
		// machine falls on both.
		for i := -1; i < runs; i++ {
			for k, proto := range []Protocol{SendRecv, Read} {
				start := time.Now()
				got, n, err := f.fetchFrom(ctx, peer, o.ID, scratch, proto)
				if err != nil {
					return res, fmt.Errorf("transfer: tune: %v of %d bytes by %v: %w", o.ID, o.Size, proto, err)
				}
				f.stats.done(got, n)
				if i >= 0 {
					times[k][i] = time.Since(start)
				}
			}
		}
		for k := range times {
			slices.Sort(times[k])
		}
		pt.SendRecv, pt.Read = times[0][runs/2], times[1][runs/2]
		res.Points = append(res.Points, pt)
	}
	res.Threshold, res.Found = crossover(res.Points)
	return res, nil
}

// crossover picks the threshold the measured points favour: of the cuts
// "SEND/RECV below size T, READ from T on" (T one of the sizes, or one
// byte past the largest: SEND/RECV everywhere), the one whose choices
// lose least against the faster protocol at each size, summed as
// relative excess (a choice 20 % slower than the best costs 0.2). One
// noisy size therefore moves the cut only when it outweighs its
// neighbours — the rule "from where READ stays faster" gave up on a
// whole sweep when SEND/RECV won one late size by a hair. Ties go to
// the larger cut (SEND/RECV registers nothing). Found is false when
// the cut is past the largest size.
func crossover(pts []TunePoint) (int, bool) {
	if len(pts) == 0 {
		return DefaultThreshold, false
	}
	excess := func(chosen, other time.Duration) float64 {
		best := min(chosen, other)
		if best <= 0 {
			return 0
		}
		return float64(chosen-best) / float64(best)
	}
	// cost(i): SEND/RECV for pts[:i], READ for pts[i:].
	bestI, bestCost := len(pts), 0.0
	for _, p := range pts {
		bestCost += excess(p.SendRecv, p.Read)
	}
	for i := len(pts) - 1; i >= 0; i-- {
		var cost float64
		for j, p := range pts {
			if j < i {
				cost += excess(p.SendRecv, p.Read)
			} else {
				cost += excess(p.Read, p.SendRecv)
			}
		}
		if cost < bestCost {
			bestI, bestCost = i, cost
		}
	}
	if bestI == len(pts) {
		return pts[len(pts)-1].Size + 1, false
	}
	return pts[bestI].Size, true
}

// abortingSink creates objects in a Sink and aborts them where the
// transfer would seal them: the measured fetch does all its work, and
// the object can be fetched again.
type abortingSink struct{ object.Sink }

func (s abortingSink) Create(id object.ID, dataSize, metaSize int) ([]byte, func() error, func(), error) {
	dst, _, abort, err := s.Sink.Create(id, dataSize, metaSize)
	if err != nil {
		return nil, nil, nil, err
	}
	return dst, func() error { abort(); return nil }, abort, nil
}

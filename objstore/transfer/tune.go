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
	// Threshold is the crossover: the smallest measured size from which
	// READ is faster than SEND/RECV at that size and every larger one.
	// Found is false when READ is not faster even at the largest size;
	// Threshold is then one byte past it.
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
	times := make([]time.Duration, runs)
	for _, o := range objs {
		pt := TunePoint{Size: o.Size}
		for _, proto := range []Protocol{SendRecv, Read} {
			for i := -1; i < runs; i++ {
				start := time.Now()
				got, n, err := f.fetchFrom(ctx, peer, o.ID, scratch, proto)
				if err != nil {
					return res, fmt.Errorf("transfer: tune: %v of %d bytes by %v: %w", o.ID, o.Size, proto, err)
				}
				f.stats.done(got, n)
				if i >= 0 {
					times[i] = time.Since(start)
				}
			}
			slices.Sort(times)
			med := times[runs/2]
			if proto == SendRecv {
				pt.SendRecv = med
			} else {
				pt.Read = med
			}
		}
		res.Points = append(res.Points, pt)
	}
	res.Threshold, res.Found = crossover(res.Points)
	return res, nil
}

// crossover is the smallest size from which Read stays faster.
func crossover(pts []TunePoint) (int, bool) {
	if len(pts) == 0 {
		return DefaultThreshold, false
	}
	th, found := pts[len(pts)-1].Size+1, false
	for i := len(pts) - 1; i >= 0 && pts[i].Read < pts[i].SendRecv; i-- {
		th, found = pts[i].Size, true
	}
	return th, found
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

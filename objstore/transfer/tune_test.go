package transfer

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// TestTune measures a small table and leaves the sink as it was.
func TestTune(t *testing.T) {
	r := newRig(t, "loop", Config{})
	f := r.fetcher(t, Hybrid)
	var objs []TuneObject
	for size := 1 << 10; size <= 1<<20; size <<= 2 {
		objs = append(objs, TuneObject{ID: r.src.add(size, 0), Size: size})
	}
	sink := newMemSink()
	res, err := Tune(testCtx(t), f, r.srv.VerbsAddr(), sink, objs, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != len(objs) || res.Runs != 3 {
		t.Fatalf("%d points of %d runs, want %d of 3", len(res.Points), res.Runs, len(objs))
	}
	valid := res.Threshold == objs[len(objs)-1].Size+1 && !res.Found
	for i, p := range res.Points {
		if p.Size != objs[i].Size || p.SendRecv <= 0 || p.Read <= 0 {
			t.Fatalf("point %d: %+v", i, p)
		}
		valid = valid || res.Found && res.Threshold == p.Size
		t.Logf("%8d B  send/recv %v  read %v", p.Size, p.SendRecv, p.Read)
	}
	if !valid {
		t.Fatalf("threshold %d (found %v) is not a measured size", res.Threshold, res.Found)
	}
	if sink.commits.Load() != 0 || sink.aborts.Load() != sink.creates.Load() || sink.creates.Load() != int64(2*4*len(objs)) {
		t.Fatalf("sink: %d creates, %d commits, %d aborts", sink.creates.Load(), sink.commits.Load(), sink.aborts.Load())
	}
	if st := f.Stats(); st.Transfers[Read] != int64(4*len(objs)) || st.Transfers[SendRecv] != int64(4*len(objs)) {
		t.Fatalf("transfers %v: want %d by READ and by SEND/RECV", st.Transfers, 4*len(objs))
	}
	if _, err := Tune(testCtx(t), r.fetcher(t, TCPBulk), "x", sink, objs, 1); err == nil {
		t.Fatal("Tune with a fetcher without a device succeeded")
	}
	if _, err := Tune(testCtx(t), f, r.srv.VerbsAddr(), sink, []TuneObject{{ID: object.NewID(), Size: 5}}, 1); err == nil {
		t.Fatal("Tune of a missing object succeeded")
	}
}

// TestCrossover: the threshold is the cut whose choices lose least
// against the faster protocol per size; one noisy size does not move it.
func TestCrossover(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name  string
		pts   []TunePoint
		th    int
		found bool
	}{
		{"clean", []TunePoint{{1, 1 * us, 9 * us}, {2, 2 * us, 5 * us}, {4, 4 * us, 5 * us}, {8, 8 * us, 3 * us}, {16, 16 * us, 4 * us}}, 8, true},
		// SEND/RECV wins 1 MiB by a hair (noise): the cut stays where
		// READ wins clearly (the old rule found none).
		{"late noise", []TunePoint{{1, 100 * us, 200 * us}, {2, 150 * us, 140 * us}, {4, 300 * us, 200 * us}, {8, 660 * us, 670 * us}}, 2, true},
		// READ wins one small size by a little, loses around it by a
		// lot: it does not move the cut down.
		{"early noise", []TunePoint{{1, 10 * us, 11 * us}, {2, 10 * us, 9 * us}, {4, 10 * us, 20 * us}, {8, 40 * us, 20 * us}}, 8, true},
		{"never", []TunePoint{{1, 1 * us, 9 * us}, {2, 2 * us, 3 * us}, {4, 4 * us, 5 * us}}, 5, false},
		{"always", []TunePoint{{1, 9 * us, 1 * us}, {2, 9 * us, 3 * us}}, 1, true},
	} {
		if th, ok := crossover(tc.pts); th != tc.th || ok != tc.found {
			t.Errorf("%s: crossover %d %v, want %d %v", tc.name, th, ok, tc.th, tc.found)
		}
	}
	if th, ok := crossover(nil); th != DefaultThreshold || ok {
		t.Errorf("no points: %d %v, want the default, not found", th, ok)
	}
}

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

// TestCrossover: the threshold is where READ becomes and stays faster.
func TestCrossover(t *testing.T) {
	us := time.Microsecond
	pts := []TunePoint{{1, 1 * us, 9 * us}, {2, 2 * us, 1 * us}, {4, 4 * us, 5 * us}, {8, 8 * us, 3 * us}, {16, 16 * us, 4 * us}}
	if th, ok := crossover(pts); th != 8 || !ok {
		t.Fatalf("crossover %d %v, want 8 (READ loses again at 4)", th, ok)
	}
	if th, ok := crossover(pts[:3]); th != 5 || ok {
		t.Fatalf("crossover %d %v, want 5, not found", th, ok)
	}
}

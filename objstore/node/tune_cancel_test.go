package node

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTuneCancelled cancels a Tune against a holder node in the middle of
// its fetches: it returns the context's error, and the holder is left
// with none of the objects Tune created there (nothing pinned, nothing
// allocated).
func TestTuneCancelled(t *testing.T) {
	h := serveNode(t, Config{Mem: 64 << 20, Stats: "127.0.0.1:0", Transfer: Transfer{Listen: "127.0.0.1:0"}})
	for _, after := range []time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(after, cancel)
		_, err := Tune(ctx, TuneConfig{Peer: h.Verbs, PeerSocket: h.Socket, Sizes: []int{1 << 10, 256 << 10, 4 << 20}, Runs: 100000})
		timer.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Tune cancelled after %v: %v, want context.Canceled", after, err)
		}
		var st StatsReport
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if st, err = ReadStats(context.Background(), h.Stats); err != nil {
				t.Fatal(err)
			}
			if st.Store.Objects == 0 || time.Now().After(deadline) {
				break
			}
		}
		if s := st.Store; s.Objects != 0 || s.Pins != 0 || s.BytesAllocated != 0 {
			t.Fatalf("Tune cancelled after %v left the holder %d objects, %d pins, %d bytes", after, s.Objects, s.Pins, s.BytesAllocated)
		}
	}
}

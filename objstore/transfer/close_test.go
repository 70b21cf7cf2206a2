package transfer

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// warnings records the warnings logged through it.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	w.msgs = append(w.msgs, b.String())
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// TestCloseReleasesEverything: after transfers of both kinds, one
// cancelled mid-READ, closing the fetcher and the server releases every
// pair: each PD deallocates, which it does only once every region in it —
// buffers and objects — is deregistered.
func TestCloseReleasesEverything(t *testing.T) {
	w := &warnings{}
	cfg := Config{Slots: 4, SlotSize: 4096, Logger: slog.New(w)}
	r := newRig(t, "loop", cfg)
	f := r.fetcher(t, Hybrid)
	sink := newMemSink()
	ids := []object.ID{r.src.add(100, 0), r.src.add(2<<20, 7), r.src.add(40<<10, 0)}
	for _, err := range f.Fetch(testCtx(t), ids, sink) {
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(100*time.Microsecond, cancel)
	_ = f.Fetch(ctx, []object.ID{r.src.add(4<<20, 0)}, sink)
	cancel()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if fs, ss := f.Stats(), r.srv.Stats(); fs.PairsClosed != 1 || ss.PairsClosed != 1 || fs.Registrations != 0 || ss.Registrations != 0 || ss.Pins != 0 {
		t.Fatalf("after Close: fetcher %+v, server %+v", fs, ss)
	}
	if !sink.settled() || r.src.pins.Load() != 0 {
		t.Fatal("objects left unsettled or pinned")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, "releasing pair") {
			t.Fatalf("a pair was not released cleanly: %s", m)
		}
	}
	if err := f.Fetch(testCtx(t), ids[:1], newMemSink())[0]; err == nil {
		t.Fatal("a closed fetcher fetched")
	}
}

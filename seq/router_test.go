package seq_test

import (
	"context"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/seq"
	"github.com/rdmakit/rdmakit/verbs"
)

// routedSequencer is a sequencer that routes its CQ's completions.
type routedSequencer interface {
	seq.Sequencer
	Router() *verbs.Router
	Close() error
}

// TestForeignRequestsOnSequencerQP posts READs of another user, with a
// tag of its own, on the QP of an FAA and a header-only sequencer while
// numbers are taken: the sequencer's poller routes their completions to
// that user's handler, and the numbers stay right.
func TestForeignRequestsOnSequencerQP(t *testing.T) {
	for _, design := range []string{"faa", "header-only"} {
		t.Run(design, func(t *testing.T) {
			c, s := connected(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var sq routedSequencer
			if design == "faa" {
				f, err := seq.NewFAA(c.qp, c.cq, c.mr, s.mr.Addr(), s.mr.RKey(), 16, verbs.PollAdaptive)
				if err != nil {
					t.Fatal(err)
				}
				sq = f
			} else {
				go seq.NewHeaderOnlyServer(0).Serve(ctx, s.qp, s.cq, 64, verbs.PollAdaptive)
				h, err := seq.NewHeaderOnly(c.qp, c.cq, 64, verbs.PollAdaptive)
				if err != nil {
					t.Fatal(err)
				}
				sq = h
			}
			defer sq.Close()
			got := make(chan verbs.WC, 16)
			tag, err := sq.Router().Register(func(wc *verbs.WC) error { got <- *wc; return nil })
			if err != nil {
				t.Fatal(err)
			}
			copy(s.mr.Bytes()[64:], "abcdefgh")
			local := verbs.SGE{Addr: c.mr.Addr() + 1024, Length: 8, LKey: c.mr.LKey()}
			for i := uint64(0); i < 10; i++ {
				err := c.qp.PostSend([]verbs.SendWR{{ID: tag.ID(i), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
					SGL: []verbs.SGE{local}, RemoteAddr: s.mr.Addr() + 64, RKey: s.mr.RKey()}})
				if err != nil {
					t.Fatal(err)
				}
				if n, err := sq.Next(ctx, 1); err != nil || n != i {
					t.Fatalf("Next = %d, %v; want %d", n, err, i)
				}
				select {
				case wc := <-got:
					if wc.ID != tag.ID(i) || wc.Status != verbs.StatusSuccess {
						t.Errorf("foreign completion %d: %#x %v", i, wc.ID, wc.Status)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("foreign READ %d never completed", i)
				}
			}
			if string(c.mr.Bytes()[1024:1032]) != "abcdefgh" {
				t.Errorf("READ read %q", c.mr.Bytes()[1024:1032])
			}
			if d := sq.Router().Dropped(); d != 0 {
				t.Errorf("%d completions dropped", d)
			}
		})
	}
}

package transfer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// rawPeer is a pair whose messages the test sees and whose SENDs it
// crafts byte by byte: a hostile holder or fetcher.
type rawPeer struct {
	p      *pair
	msgs   chan msg
	repost bool
}

func newRawPair(t *testing.T, dev verbs.Device, cfg Config, repost bool) *rawPeer {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPair(dev, &cfg, &counters{}, "raw")
	if err != nil {
		t.Fatal(err)
	}
	rp := &rawPeer{p: p, msgs: make(chan msg, 1024), repost: repost}
	p.onMsg = func(m *msg, _ int) (bool, error) {
		c := *m
		c.payload = nil
		rp.msgs <- c
		return rp.repost, nil
	}
	p.onRead = func(uint32, verbs.Status) {}
	t.Cleanup(func() {
		p.fail(errors.New("test over"))
		<-p.freed
	})
	return rp
}

// send SENDs b as it is (the pair fills in bytes 2:4, the credits, when
// b is that long).
func (rp *rawPeer) send(t *testing.T, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	i, err := rp.p.acquire(ctx, nil, make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	copy(rp.p.sendBuf(i), b)
	if err := rp.p.post(i, len(b)); err != nil {
		t.Fatal(err)
	}
}

func (rp *rawPeer) next(t *testing.T) msg {
	t.Helper()
	select {
	case m := <-rp.msgs:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message from the peer")
	}
	return msg{}
}

// hostileHolder accepts pairs on a fresh loop device and hands each to
// the test as a rawPeer.
func hostileHolder(t *testing.T, r *rig, cfg Config) (string, chan *rawPeer) {
	t.Helper()
	dev, err := r.fabric.Open("hostile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	l, err := cm.Listen(testCtx(t), dev, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	peers := make(chan *rawPeer, 16)
	go func() {
		for {
			req, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			rp := newRawPair(t, dev, cfg, true)
			conn, err := req.Accept(context.Background(), rp.p.options())
			if err != nil {
				return
			}
			if err := rp.p.start(conn); err != nil {
				return
			}
			peers <- rp
		}
	}()
	return l.Addr(), peers
}

func header(typ uint8, tid uint32, n int) []byte {
	b := make([]byte, n)
	putHeader(b, typ, tid)
	return b
}

// TestHostileHolder: a holder that answers with malformed messages makes
// the fetch fail with ErrProtocol (and ErrUnavailable), closes that pair,
// aborts what was created and panics nowhere.
func TestHostileHolder(t *testing.T) {
	cfg := Config{Slots: 4, SlotSize: 4096}
	r := newRig(t, "loop", cfg)
	addr, peers := hostileHolder(t, r, cfg)
	data := func(tid uint32, size uint64, p Protocol) []byte {
		b := make([]byte, dataLen)
		encodeData(b, tid, size, 0, p)
		return b
	}
	cases := map[string]func(tid uint32) [][]byte{
		"short":        func(uint32) [][]byte { return [][]byte{{msgData, wireVersion, 0, 0, 1}} },
		"bad version":  func(tid uint32) [][]byte { b := data(tid, 10, SendRecv); b[1] = 7; return [][]byte{b} },
		"unknown type": func(tid uint32) [][]byte { return [][]byte{header(99, tid, 16)} },
		"long DATA":    func(tid uint32) [][]byte { return [][]byte{append(data(tid, 10, SendRecv), 0)} },
		"unknown DATA": func(tid uint32) [][]byte { return [][]byte{data(tid+1000, 10, SendRecv)} },
		"huge DATA":    func(tid uint32) [][]byte { return [][]byte{data(tid, 1<<62, SendRecv)} },
		"bad protocol": func(tid uint32) [][]byte { return [][]byte{data(tid, 10, TCP4K)} },
		"second DATA":  func(tid uint32) [][]byte { return [][]byte{data(tid, 10, SendRecv), data(tid, 10, SendRecv)} },
		"CHUNK too far": func(tid uint32) [][]byte {
			c := header(msgChunk, tid, chunkHdrLen+20)
			return [][]byte{data(tid, 10, SendRecv), c}
		},
		"READ_INFO too large": func(tid uint32) [][]byte {
			b := make([]byte, readInfoLen)
			encodeReadInfo(b, tid, 1<<20, 77, 200)
			return [][]byte{data(tid, 100, Read), b}
		},
		"READ_INFO for SEND/RECV": func(tid uint32) [][]byte {
			b := make([]byte, readInfoLen)
			encodeReadInfo(b, tid, 1<<20, 77, 100)
			return [][]byte{data(tid, 100, SendRecv), b}
		},
		"TRANSFER at a fetcher": func(tid uint32) [][]byte {
			b := make([]byte, transferLen)
			encodeTransfer(b, tid, object.ID{}, Hybrid, 1)
			return [][]byte{b}
		},
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := NewFetcher(Config{Slots: 4, SlotSize: 4096, Device: r.fdev, Peers: []string{addr}})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sink := newMemSink()
			done := make(chan error, 1)
			go func() { done <- f.Fetch(testCtx(t), []object.ID{object.NewID()}, sink)[0] }()
			rp := <-peers
			m := rp.next(t)
			if m.typ != msgTransfer {
				t.Fatalf("first message %s, want TRANSFER", msgName(m.typ))
			}
			for _, b := range answer(m.tid) {
				rp.send(t, b)
			}
			err = <-done
			if !errors.Is(err, object.ErrProtocol) || !errors.Is(err, object.ErrUnavailable) {
				t.Fatalf("fetch: %v, want ErrProtocol and ErrUnavailable", err)
			}
			eventually(t, "pair closed, object aborted", func() bool {
				st := f.Stats()
				return st.PairsClosed == 1 && st.Registrations == 0 && sink.settled() && sink.commits.Load() == 0
			})
		})
	}
}

// hostileFetcher dials the rig's server with a raw pair.
func hostileFetcher(t *testing.T, r *rig, repost bool) *rawPeer {
	t.Helper()
	rp := newRawPair(t, r.fdev, r.cfg, repost)
	conn, err := cm.Dial(testCtx(t), r.fdev, r.srv.VerbsAddr(), rp.p.options())
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.p.start(conn); err != nil {
		t.Fatal(err)
	}
	return rp
}

// TestHostileFetcher: malformed messages to a Server close that pair and
// nothing else; the holder keeps serving others.
func TestHostileFetcher(t *testing.T) {
	cfg := Config{Slots: 4, SlotSize: 4096, FinTimeout: time.Second}
	r := newRig(t, "loop", cfg)
	cases := map[string][]byte{
		"unknown type":     header(42, 1, 8),
		"FIN for nothing":  append(header(msgFin, 5, 8), finDone),
		"DATA at a holder": header(msgData, 1, dataLen),
		"truncated":        header(msgTransfer, 1, transferLen-1),
		"transfer id 0":    header(msgTransfer, 0, transferLen),
	}
	closed := int64(0)
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			rp := hostileFetcher(t, r, true)
			rp.send(t, b)
			closed++
			eventually(t, "the server closes the pair", func() bool { return r.srv.Stats().PairsClosed == closed })
		})
	}
	// A well-behaved fetcher is still served.
	f := r.fetcher(t, Hybrid)
	sink := newMemSink()
	if err := f.Fetch(testCtx(t), []object.ID{r.src.add(40<<10, 1)}, sink)[0]; err != nil {
		t.Fatal(err)
	}
}

// TestFetcherNeverReads: a fetcher that asks for large objects and never
// re-posts its receive slots stalls the holder's workers, which give up
// after FinTimeout: the pair closes and every pin goes. A fetcher that
// asks for more transfers than a pair allows loses the pair at once.
func TestFetcherNeverReads(t *testing.T) {
	cfg := Config{Slots: 4, SlotSize: 4096, Workers: 2, FinTimeout: 300 * time.Millisecond}
	r := newRig(t, "loop", cfg)
	big := r.src.add(1<<20, 0)
	rp := hostileFetcher(t, r, false)
	for tid := uint32(1); tid <= 3; tid++ { // as many as its credits allow (one is kept for ACKs)
		b := make([]byte, transferLen)
		encodeTransfer(b, tid, big, SendRecv, 0)
		rp.send(t, b)
	}
	eventually(t, "the holder stalls with objects pinned", func() bool { return r.src.pins.Load() == 2 })
	eventually(t, "the stalled pair is closed and unpinned", func() bool {
		return r.srv.Stats().PairsClosed == 1 && r.src.pins.Load() == 0
	})

	// Too many in flight: READs whose FIN never comes keep the one
	// worker busy while requests pile up.
	r.src.onPin = nil
	rp = hostileFetcher(t, r, true)
	for tid := uint32(1); tid <= uint32(maxInflight(rp.p.cfg)+cfg.Workers+1); tid++ {
		b := make([]byte, transferLen)
		encodeTransfer(b, tid, big, Read, 0)
		if rp.p.failure() != nil {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		i, err := rp.p.acquire(ctx, nil, make(chan struct{}, 1))
		cancel()
		if err != nil {
			break
		}
		copy(rp.p.sendBuf(i), b)
		_ = rp.p.post(i, len(b))
	}
	eventually(t, "the flooding pair is closed and unpinned", func() bool {
		st := r.srv.Stats()
		return st.PairsClosed == 2 && r.src.pins.Load() == 0 && st.Registrations == 0
	})
}

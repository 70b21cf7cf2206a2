package ring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// newPair formats a ring of capacity bytes in ordinary memory and attaches
// a second handle: producer and consumer, as two processes would hold.
func newPair(t testing.TB, capacity int) (prod, cons *Ring, mem []byte) {
	t.Helper()
	mem = alignedBuf(Size(capacity))
	prod, err := Init(mem)
	if err != nil {
		t.Fatal(err)
	}
	if prod.Capacity() != capacity {
		t.Fatalf("capacity %d, want %d", prod.Capacity(), capacity)
	}
	cons, err = Attach(mem)
	if err != nil {
		t.Fatal(err)
	}
	return prod, cons, mem
}

func TestInitCapacity(t *testing.T) {
	for _, tc := range []struct{ size, capacity int }{
		{Size(MinCapacity), MinCapacity},
		{Size(MinCapacity) + 63, MinCapacity},
		{Size(128), 128},
		{Size(4096) + 4095, 4096},
		{Size(1 << 20), 1 << 20},
	} {
		r, err := Init(alignedBuf(tc.size))
		if err != nil {
			t.Fatalf("Init(%d bytes): %v", tc.size, err)
		}
		if r.Capacity() != tc.capacity || r.MaxMessage() != tc.capacity/2-8 {
			t.Errorf("Init(%d bytes): capacity %d max %d, want %d and %d",
				tc.size, r.Capacity(), r.MaxMessage(), tc.capacity, tc.capacity/2-8)
		}
	}
	if _, err := Init(alignedBuf(Size(MinCapacity) - 1)); err == nil {
		t.Error("Init of a too short buffer succeeded")
	}
	if _, err := Init(alignedBuf(Size(256))[4:]); err == nil {
		t.Error("Init of a misaligned buffer succeeded")
	}
	if _, err := Init(nil); err == nil {
		t.Error("Init(nil) succeeded")
	}
}

func TestEmptyFull(t *testing.T) {
	prod, cons, _ := newPair(t, 256)
	if _, err := cons.Peek(); err != ErrEmpty {
		t.Fatalf("Peek on an empty ring: %v, want ErrEmpty", err)
	}
	cons.Release() // nothing peeked: no-op
	prod.Commit()  // nothing reserved: no-op
	if _, err := cons.Peek(); err != ErrEmpty {
		t.Fatalf("Peek after no-op Commit: %v", err)
	}
	// 8 records of 32 bytes (24-byte payloads) fill 256 bytes exactly.
	msg := make([]byte, 24)
	for i := range 8 {
		msg[0] = byte(i)
		if err := prod.Write(msg); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := prod.Write(nil); err != ErrFull {
		t.Fatalf("Write to a full ring: %v, want ErrFull", err)
	}
	// A reservation abandoned by a second Reserve publishes nothing.
	for i := range 8 {
		p, err := cons.Peek()
		if err != nil || len(p) != 24 || p[0] != byte(i) {
			t.Fatalf("peek %d: %v %v", i, p, err)
		}
		if q, _ := cons.Peek(); &q[0] != &p[0] {
			t.Fatal("second Peek returned another message")
		}
		cons.Release()
		if i == 0 {
			// 32 bytes free: a 24-byte message fits, a 25-byte one not.
			if _, err := prod.Reserve(25); err != ErrFull {
				t.Fatalf("Reserve(25) with 32 free: %v", err)
			}
			if _, err := prod.Reserve(24); err != nil {
				t.Fatalf("Reserve(24) with 32 free: %v", err)
			}
			if _, err := prod.Reserve(0); err != nil { // abandons the 24
				t.Fatal(err)
			}
		}
	}
	if _, err := cons.Peek(); err != ErrEmpty {
		t.Fatalf("Peek after draining: %v", err)
	}
	prod.Commit() // the 0-byte message
	if p, err := cons.Peek(); err != nil || len(p) != 0 {
		t.Fatalf("zero-length message: %v %v", p, err)
	}
	cons.Release()
	if _, err := cons.Peek(); err != ErrEmpty {
		t.Fatalf("Peek after the last: %v", err)
	}
}

func TestTooLarge(t *testing.T) {
	prod, cons, _ := newPair(t, 1024)
	max := prod.MaxMessage()
	if max != 504 {
		t.Fatalf("MaxMessage %d, want 504", max)
	}
	for _, n := range []int{max + 1, 1024, 1 << 40, -1} {
		if _, err := prod.Reserve(n); err != ErrTooLarge {
			t.Errorf("Reserve(%d): %v, want ErrTooLarge", n, err)
		}
		if err := prod.WaitSpace(t.Context(), n, 0, nil); err != ErrTooLarge {
			t.Errorf("WaitSpace(%d): %v, want ErrTooLarge", n, err)
		}
	}
	big := bytes.Repeat([]byte{7}, max)
	for range 5 { // at several positions, one of them wrapping
		if err := prod.Write(big); err != nil {
			t.Fatal(err)
		}
		if p, err := cons.Peek(); err != nil || !bytes.Equal(p, big) {
			t.Fatalf("max message: %v", err)
		}
		cons.Release()
		_ = prod.Write(make([]byte, 40))
		_, _ = cons.Peek()
		cons.Release()
	}
}

// TestEmptyFitsMax checks the bound behind MaxMessage: an empty ring takes
// a maximal message wherever its indices stand, skip record included.
func TestEmptyFitsMax(t *testing.T) {
	prod, cons, _ := newPair(t, 256)
	for pos := 0; pos < 2*256; pos += 8 {
		if err := prod.Write(make([]byte, prod.MaxMessage())); err != nil {
			t.Fatalf("at %d: %v", pos, err)
		}
		if _, err := cons.Peek(); err != nil {
			t.Fatal(err)
		}
		cons.Release()
		// Advance one record of 8 bytes.
		if err := prod.Write(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := cons.Peek(); err != nil {
			t.Fatal(err)
		}
		cons.Release()
	}
}

// TestExactFit covers a message ending exactly at the end of the data area
// (no skip), one that needs a skip of exactly one header, and a ring
// filled to the last byte across the wrap.
func TestExactFit(t *testing.T) {
	prod, cons, mem := newPair(t, 256)
	data := mem[HeaderSize:]
	read := func(want []byte) {
		t.Helper()
		p, err := cons.Peek()
		if err != nil || !bytes.Equal(p, want) {
			t.Fatalf("Peek: %v %v, want %v", p, err, want)
		}
		cons.Release()
	}
	a := bytes.Repeat([]byte{1}, 120) // record 128
	b := bytes.Repeat([]byte{2}, 112) // record 120
	if err := prod.Write(a); err != nil {
		t.Fatal(err)
	}
	if err := prod.Write(b); err != nil { // ends at 248: 8 bytes left
		t.Fatal(err)
	}
	read(a)
	read(b)
	c := bytes.Repeat([]byte{3}, 16) // record 24 > 8 left: skip of 8
	if err := prod.Write(c); err != nil {
		t.Fatal(err)
	}
	if w := *word64(data, 248); w != 8|kindSkip<<32 {
		t.Fatalf("skip header %#x", w)
	}
	if !bytes.Equal(data[8:24], c) {
		t.Fatal("wrapped message not at offset 0")
	}
	read(c)
	// head = tail = 280 (pos 24). Fill exactly: 232 bytes to the end,
	// then 24 bytes at the start.
	d1 := bytes.Repeat([]byte{4}, 120) // record 128
	d2 := bytes.Repeat([]byte{6}, 96)  // record 104: ends exactly at 256
	e := bytes.Repeat([]byte{5}, 16)   // record 24: fills 0..24
	for _, m := range [][]byte{d1, d2, e} {
		if err := prod.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	if w := *word64(data, 152); w != 96 {
		t.Fatalf("record before the end: header %#x", w)
	}
	if err := prod.Write(nil); err != ErrFull {
		t.Fatalf("Write to an exactly full ring: %v", err)
	}
	if got := atomic.LoadUint64(prod.tailW) - atomic.LoadUint64(prod.headW); got != 256 {
		t.Fatalf("%d bytes in use, want 256", got)
	}
	read(d1)
	read(d2)
	read(e)
	if _, err := cons.Peek(); err != ErrEmpty {
		t.Fatal(err)
	}
}

// TestRoundTrip streams many random-length messages through small rings
// with random batching, so every wrap position occurs, and checks content
// and order.
func TestRoundTrip(t *testing.T) {
	for _, capacity := range []int{64, 256, 4096} {
		prod, cons, _ := newPair(t, capacity)
		rng := rand.New(rand.NewPCG(1, uint64(capacity)))
		max := prod.MaxMessage()
		scratch := make([]byte, max)
		var sent, recv uint64
		total := uint64(100_000)
		if raceEnabled {
			total /= 4
		}
		for recv < total {
			for k := rng.IntN(8); k > 0 && sent < total; k-- {
				n := msgLen(sent, max)
				p, err := prod.Reserve(n)
				if err == ErrFull {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				fillMsg(p, sent)
				prod.Commit()
				sent++
			}
			for k := rng.IntN(8); k > 0; k-- {
				p, err := cons.Peek()
				if err == ErrEmpty {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if !checkMsg(p, recv, max, scratch) {
					t.Fatalf("capacity %d: message %d corrupted: %v", capacity, recv, p)
				}
				cons.Release()
				recv++
			}
		}
	}
}

func TestAttachValidates(t *testing.T) {
	good := func() []byte {
		b := alignedBuf(Size(256))
		if _, err := Init(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	put32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { *word32(b, off) = v }
	}
	put64 := func(off int, v uint64) func([]byte) {
		return func(b []byte) { *word64(b, off) = v }
	}
	for _, tc := range []struct {
		name string
		mod  func([]byte)
		want error
	}{
		{"magic", put32(offMagic, 0x12345678), ErrCorrupt},
		{"zero", func(b []byte) { clear(b) }, ErrCorrupt},
		{"version", put32(offVersion, 2), ErrVersion},
		{"header size", put64(offHeaderLen, 64), ErrCorrupt},
		{"capacity not power of two", put64(offCapacity, 192), ErrCorrupt},
		{"capacity too small", put64(offCapacity, 32), ErrCorrupt},
		{"capacity zero", put64(offCapacity, 0), ErrCorrupt},
		{"capacity beyond buffer", put64(offCapacity, 512), ErrCorrupt},
		{"capacity huge", put64(offCapacity, 1<<63), ErrCorrupt},
		{"tail misaligned", put64(offTail, 4), ErrCorrupt},
		{"head misaligned", put64(offHead, 4), ErrCorrupt},
		{"tail too far", put64(offTail, 264), ErrCorrupt},
		{"head after tail", put64(offHead, 8), ErrCorrupt},
	} {
		b := good()
		tc.mod(b)
		if _, err := Attach(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: Attach: %v, want %v", tc.name, err, tc.want)
		}
	}
	b := good()
	if _, err := Attach(b[:Size(256)-8]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short buffer: %v", err)
	}
	if _, err := Attach(b[:100]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("buffer shorter than a header: %v", err)
	}
	if _, err := Attach(alignedBuf(Size(256) + 8)[4:]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("misaligned buffer: %v", err)
	}
	// A ring in use attaches where it stands.
	*word64(b, offHead) = 1 << 40
	*word64(b, offTail) = 1<<40 + 256
	if r, err := Attach(b); err != nil || r.head != 1<<40 || r.tail != 1<<40+256 {
		t.Errorf("ring in use: %v", err)
	}
}

// TestCorruptionIsSticky corrupts a live ring behind each side's back.
func TestCorruptionIsSticky(t *testing.T) {
	setup := func() (*Ring, *Ring, []byte) {
		prod, cons, mem := newPair(t, 256)
		if err := prod.Write(make([]byte, 40)); err != nil { // record 48
			t.Fatal(err)
		}
		return prod, cons, mem
	}
	data := func(mem []byte) []byte { return mem[HeaderSize:] }
	for _, tc := range []struct {
		name string
		mod  func(mem []byte)
		prod bool // the producer side detects it (else the consumer)
	}{
		{"tail beyond capacity", func(m []byte) { *word64(m, offTail) = 1024 }, false},
		{"tail before head", func(m []byte) { *word64(m, offTail) = ^uint64(7) }, false},
		{"tail misaligned", func(m []byte) { *word64(m, offTail) = 100 }, false},
		{"unknown kind", func(m []byte) { *word64(data(m), 0) = 40 | 7<<32 }, false},
		{"length over max", func(m []byte) { *word64(data(m), 0) = 121 }, false},
		{"length beyond tail", func(m []byte) { *word64(data(m), 0) = 100 }, false},
		{"skip at 0", func(m []byte) { *word64(data(m), 0) = 256 | kindSkip<<32 }, false},
		{"head beyond tail", func(m []byte) { *word64(m, offHead) = 512 }, true},
		{"head misaligned", func(m []byte) { *word64(m, offHead) = 3 }, true},
	} {
		prod, cons, mem := setup()
		tc.mod(mem)
		var err error
		if tc.prod {
			// Fill until the producer must read head.
			for err == nil {
				err = prod.Write(make([]byte, 40))
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: Write: %v, want ErrCorrupt", tc.name, err)
			}
			if err2 := prod.Write(nil); err2 != err {
				t.Errorf("%s: second Write: %v, not sticky", tc.name, err2)
			}
			if err2 := prod.WaitSpace(t.Context(), 0, 0, nil); err2 != err {
				t.Errorf("%s: WaitSpace: %v", tc.name, err2)
			}
			continue
		}
		_, err = cons.Peek()
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Peek: %v, want ErrCorrupt", tc.name, err)
			continue
		}
		if _, err2 := cons.Peek(); err2 != err {
			t.Errorf("%s: second Peek: %v, not sticky", tc.name, err2)
		}
		if err2 := cons.Wait(t.Context(), 0, nil); err2 != err {
			t.Errorf("%s: Wait: %v", tc.name, err2)
		}
		cons.Release()
	}
	// A skip with nothing after it, at the end of the ring.
	prod, cons, mem := newPair(t, 256)
	for range 2 {
		_ = prod.Write(make([]byte, 112)) // records of 120: ends at 240
		_, _ = cons.Peek()
		cons.Release()
	}
	*word64(data(mem), 240) = 16 | kindSkip<<32
	atomic.StoreUint64(word64(mem, offTail), 256)
	if _, err := cons.Peek(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("lone skip: %v", err)
	}
	// A skip that does not run to the end.
	prod, cons, mem = newPair(t, 256)
	for range 2 {
		_ = prod.Write(make([]byte, 112))
		_, _ = cons.Peek()
		cons.Release()
	}
	*word64(data(mem), 240) = 8 | kindSkip<<32
	*word64(data(mem), 0) = 0
	atomic.StoreUint64(word64(mem, offTail), 264)
	if _, err := cons.Peek(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short skip: %v", err)
	}
}

func TestZeroAllocs(t *testing.T) {
	prod, cons, _ := newPair(t, 4096)
	msg := make([]byte, 64)
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		msg[0] = byte(n)
		if err := prod.Write(msg); err != nil {
			t.Fatal(err)
		}
		p, err := cons.Peek()
		if err != nil || p[0] != byte(n) {
			t.Fatal(err)
		}
		cons.Release()
		if _, err := cons.Peek(); err != ErrEmpty {
			t.Fatal(err)
		}
		p, err = prod.Reserve(8)
		if err != nil {
			t.Fatal(err)
		}
		p[0] = 1
		prod.Commit()
		if _, err := cons.Peek(); err != nil {
			t.Fatal(err)
		}
		cons.Release()
		n++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Write/Peek/Release round", allocs)
	}
	// Full and too-large paths allocate nothing either.
	for prod.Write(msg) == nil {
	}
	allocs = testing.AllocsPerRun(100, func() {
		if err := prod.Write(msg); err != ErrFull {
			t.Fatal(err)
		}
		if _, err := prod.Reserve(1 << 20); err != ErrTooLarge {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per failed Write", allocs)
	}
}

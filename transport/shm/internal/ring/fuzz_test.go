package ring

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"
)

// allowed reports whether err is one the ring may return for any input:
// the operation's own outcome or a typed corruption error.
func allowed(err error) bool {
	switch err {
	case nil, ErrEmpty, ErrFull, ErrTooLarge, context.Canceled:
		return true
	}
	return errors.Is(err, ErrCorrupt)
}

// inside reports whether p lies within the data area of mem.
func inside(p, mem []byte, capacity int) bool {
	if len(p) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(&mem[HeaderSize]))
	a := uintptr(unsafe.Pointer(&p[0]))
	return a >= lo && a+uintptr(cap(p)) <= lo+uintptr(capacity)
}

// seedRing returns the bytes of a formatted ring of capacity bytes holding
// a few messages, one of them wrapped.
func seedRing(capacity int, msgs int) []byte {
	b := alignedBuf(Size(capacity))
	r, _ := Init(b)
	for i := range msgs {
		_ = r.Write(bytes.Repeat([]byte{byte(i)}, 3*i))
		if i%2 == 0 {
			if _, err := r.Peek(); err == nil {
				r.Release()
			}
		}
	}
	return b
}

// exercise runs both sides of r for a while and checks that nothing fails
// except with an allowed error and that messages stay inside the ring.
func exercise(t *testing.T, r *Ring, mem []byte) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	msg := make([]byte, 40)
	for i := range 64 {
		p, err := r.Peek()
		if !allowed(err) {
			t.Fatalf("Peek: %v", err)
		}
		if !inside(p, mem, r.Capacity()) {
			t.Fatal("Peek returned memory outside the data area")
		}
		r.Release()
		if err := r.Write(msg[:i%len(msg)]); !allowed(err) {
			t.Fatalf("Write: %v", err)
		}
		if err := r.Wait(canceled, 0, nil); !allowed(err) {
			t.Fatalf("Wait: %v", err)
		}
		if err := r.WaitSpace(canceled, i, 0, nil); !allowed(err) {
			t.Fatalf("WaitSpace: %v", err)
		}
	}
}

// FuzzAttach attaches to arbitrary memory: Attach must accept or reject
// it with a typed error, and an accepted ring must then work, or fail with
// typed errors, whatever its contents.
func FuzzAttach(f *testing.F) {
	f.Add(seedRing(64, 0))
	f.Add(seedRing(64, 7))
	f.Add(seedRing(256, 13))
	f.Add(make([]byte, Size(64)))
	bad := seedRing(128, 5)
	binary.LittleEndian.PutUint64(bad[offTail:], 1<<40)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		mem := alignedBuf(len(data))
		copy(mem, data)
		r, err := Attach(mem)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Attach: untyped error %v", err)
			}
			return
		}
		if r.Capacity() < MinCapacity || Size(r.Capacity()) > len(mem) {
			t.Fatalf("capacity %d with %d bytes", r.Capacity(), len(mem))
		}
		exercise(t, r, mem)
	})
}

// FuzzCorrupt runs a program of ring operations interleaved with writes
// of arbitrary words anywhere in the shared memory, as a buggy or hostile
// peer would do them. Until the first such write, the consumer must read
// exactly what the producer wrote; after it, every result must be a
// typed error or data inside the ring, and nothing may panic.
func FuzzCorrupt(f *testing.F) {
	f.Add([]byte{3, 10, 3, 200, 1, 2, 3, 50, 1, 2})
	f.Add([]byte{3, 100, 3, 100, 1, 2, 3, 100, 1, 2, 1, 2, 1})
	f.Add([]byte{0, 128, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1})                        // tail
	f.Add([]byte{0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 30, 3, 30, 3, 30, 3, 30}) // head
	f.Add([]byte{3, 8, 0, 128, 2, 255, 255, 255, 255, 255, 255, 255, 255, 1})  // record header
	f.Fuzz(func(t *testing.T, prog []byte) {
		const capacity = 256
		mem := alignedBuf(Size(capacity))
		prod, err := Init(mem)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := Attach(mem)
		if err != nil {
			t.Fatal(err)
		}
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		var queue [][]byte // messages committed and not yet released
		var pending []byte // reserved message
		corrupted := false
		next := func() byte {
			if len(prog) == 0 {
				return 0
			}
			c := prog[0]
			prog = prog[1:]
			return c
		}
		for seq := byte(1); len(prog) > 0; seq++ {
			switch op := next(); op % 8 {
			case 0: // the peer writes a word anywhere
				off := int(binary.LittleEndian.Uint16([]byte{next(), next()})) % len(mem) &^ 7
				var w [8]byte
				for i := range w {
					w[i] = next()
				}
				copy(mem[off:], w[:])
				corrupted = true
			case 1:
				p, err := cons.Peek()
				if !allowed(err) {
					t.Fatalf("Peek: %v", err)
				}
				if !inside(p, mem, capacity) {
					t.Fatal("Peek returned memory outside the data area")
				}
				if corrupted {
					continue
				}
				switch {
				case err == ErrEmpty && len(queue) > 0:
					t.Fatalf("Peek: empty with %d messages committed", len(queue))
				case err == nil && (len(queue) == 0 || !bytes.Equal(p, queue[0])):
					t.Fatalf("Peek: %v, want %v", p, queue)
				case err != nil && err != ErrEmpty:
					t.Fatalf("Peek on an intact ring: %v", err)
				}
			case 2:
				if !corrupted && cons.peeked != 0 {
					queue = queue[1:]
				}
				cons.Release()
			case 3, 4:
				n := int(next())
				p, err := prod.Reserve(n)
				if !allowed(err) {
					t.Fatalf("Reserve: %v", err)
				}
				if !inside(p, mem, capacity) {
					t.Fatal("Reserve returned memory outside the data area")
				}
				if err != nil {
					pending = nil
					if !corrupted && err == ErrFull && len(queue) == 0 {
						t.Fatalf("Reserve(%d) on an empty ring: ErrFull", n)
					}
					continue
				}
				for i := range p {
					p[i] = seq
				}
				pending = bytes.Clone(p)
				if op%8 == 3 {
					prod.Commit()
					queue = append(queue, pending)
					pending = nil
				}
			case 5:
				prod.Commit()
				if pending != nil {
					queue = append(queue, pending)
					pending = nil
				}
			case 6:
				if err := cons.Wait(canceled, 0, nil); !allowed(err) {
					t.Fatalf("Wait: %v", err)
				}
			case 7:
				if err := prod.WaitSpace(canceled, int(next()), 0, nil); !allowed(err) {
					t.Fatalf("WaitSpace: %v", err)
				}
			}
		}
	})
}

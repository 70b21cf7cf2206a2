package tcp

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// bigStep is the first allocation for a frame too large for a reader's
// buffer; the frame's buffer then doubles as its bytes arrive.
const bigStep = 64 << 10

// frameReader splits a byte stream into frames without copying them: a
// frame's body stays valid until the next call to next.
//
// A frame that fits the fixed buffer is read into it. A larger one (up to
// max) gets its own buffer, allocated as its bytes arrive — never more than
// twice what has arrived, nor more than bigStep before anything has — so a
// peer that announces a large frame and sends little of it costs little.
// With a budget, the frame's length is reserved from it first (the
// connection waits for it, reading nothing meanwhile), and a peer that then
// sends nothing for stall loses the connection. The buffer stays, reserved,
// for the next large frame until another connection needs the budget.
type frameReader struct {
	r     io.Reader
	buf   []byte
	start int
	end   int
	max   int

	big     []byte // the large frame being read (type byte and body)
	bigN    int    // its length; 0 when none is being read
	bigDone bool   // big was returned: drop it at the next call
	// hold keeps the buffer of the last large frame for the next one, with
	// its reservation from the budget (if any); the budget takes it back
	// when another connection needs it.
	hold     *hold
	budget   *budget
	stall    time.Duration
	deadline func(time.Time) error // the connection's SetReadDeadline

	received int64 // bytes read so far: the peer's liveness
}

func newFrameReader(r io.Reader, size, max int) *frameReader {
	return &frameReader{r: r, buf: make([]byte, size), max: max, hold: newHold(nil)}
}

// limit makes large frames reserve their length from b and bounds how long
// their peer may pause within one (read deadlines through setDeadline).
// Call free when the connection ends.
func (f *frameReader) limit(b *budget, stall time.Duration, setDeadline func(time.Time) error) {
	f.hold = newHold(b)
	f.budget, f.stall, f.deadline = b, stall, setDeadline
}

// next returns the next frame's type and body (without the type byte).
func (f *frameReader) next() (byte, []byte, error) {
	if f.bigDone {
		f.dropBig()
	}
	if f.bigN == 0 {
		if err := f.need(4); err != nil {
			return 0, nil, err
		}
		n := int(binary.LittleEndian.Uint32(f.buf[f.start:]))
		if n < 1 || n > f.max {
			return 0, nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, f.max)
		}
		if 4+n > len(f.buf) {
			if err := f.startBig(n); err != nil {
				return 0, nil, err
			}
		} else {
			if err := f.need(4 + n); err != nil {
				return 0, nil, err
			}
			body := f.buf[f.start+5 : f.start+4+n]
			typ := f.buf[f.start+4]
			f.start += 4 + n
			return typ, body, nil
		}
	}
	if err := f.fillBig(); err != nil {
		return 0, nil, err
	}
	f.bigDone = true
	return f.big[0], f.big[1:], nil
}

// startBig begins a frame of n bytes too large for buf: it reserves n
// from the budget and moves the frame's bytes already buffered to big.
func (f *frameReader) startBig(n int) error {
	have := f.end - f.start - 4 // < n: the frame does not fit buf
	buf, err := f.hold.get(n)
	if err != nil {
		return err
	}
	if buf != nil {
		f.big = buf[:have]
	} else {
		f.big = make([]byte, have, min(n, max(2*have, bigStep)))
	}
	if f.budget != nil {
		if err := f.deadline(time.Now().Add(f.stall)); err != nil {
			return err
		}
	}
	copy(f.big, f.buf[f.start+4:f.end])
	f.start, f.end = 0, 0
	f.bigN = n
	return nil
}

// fillBig reads the rest of the large frame, growing its buffer as bytes
// arrive. It reads no further than the frame's end, so what follows stays
// for buf.
func (f *frameReader) fillBig() error {
	for len(f.big) < f.bigN {
		if len(f.big) == cap(f.big) {
			nb := make([]byte, len(f.big), min(f.bigN, 2*cap(f.big)))
			copy(nb, f.big)
			f.big = nb
		}
		k, err := f.r.Read(f.big[len(f.big):min(cap(f.big), f.bigN)])
		f.big = f.big[:len(f.big)+k]
		f.received += int64(k)
		if k > 0 && f.budget != nil && len(f.big) < f.bigN {
			if derr := f.deadline(time.Now().Add(f.stall)); derr != nil && err == nil {
				err = derr
			}
		}
		if err != nil {
			if len(f.big) == f.bigN {
				break
			}
			if err == io.EOF {
				return fmt.Errorf("%w: connection closed mid-frame", ErrProtocol)
			}
			return err
		}
	}
	if f.budget != nil {
		return f.deadline(time.Time{})
	}
	return nil
}

// dropBig keeps the buffer of the large frame returned last for the next.
func (f *frameReader) dropBig() {
	f.hold.put(f.big)
	f.big, f.bigN, f.bigDone = nil, 0, false
}

// free returns what the reader holds of the budget; the connection ends.
func (f *frameReader) free() {
	f.big, f.bigN, f.bigDone = nil, 0, false
	f.hold.close()
}

// pending reports whether a whole frame is already buffered, so reading
// it will not block.
func (f *frameReader) pending() bool {
	if f.end-f.start < 4 {
		return false
	}
	n := int(binary.LittleEndian.Uint32(f.buf[f.start:]))
	return f.end-f.start >= 4+n
}

// need makes sure n ≤ len(buf) bytes from start are buffered, reading as
// needed.
func (f *frameReader) need(n int) error {
	if f.end-f.start >= n {
		return nil
	}
	if f.start+n > len(f.buf) {
		f.end = copy(f.buf, f.buf[f.start:f.end])
		f.start = 0
	}
	for f.end-f.start < n {
		k, err := f.r.Read(f.buf[f.end:])
		f.end += k
		f.received += int64(k)
		if err != nil {
			if f.end-f.start >= n {
				return nil
			}
			if err == io.EOF && f.end > f.start {
				return fmt.Errorf("%w: connection closed mid-frame", ErrProtocol)
			}
			return err
		}
	}
	return nil
}

package sock

import (
	"errors"
	"fmt"
	"io"
	"net"
)

// The zero-copy API is the thesis' shm-nts mode: the application writes
// its payload straight into the registered staging slot the record is
// sent from (WriteSlot, CommitSlot), and reads straight out of the
// connection's receive queue (Borrow, Release) — two copies fewer than
// Write and Read. The one copy left is the transport's WRITE from the
// staging slot into the peer's ring.

// ErrSlotMisuse is returned for CommitSlot without WriteSlot, Release
// without Borrow, or lengths beyond what was handed out.
var ErrSlotMisuse = errors.New("sock: zero-copy slot misuse")

// WriteSlot returns a buffer of up to n bytes (fewer when the peer's window
// or the link's record size is smaller) in the staging slot of the
// connection's next record. Fill it and call CommitSlot. Until then the
// connection holds its partition: other connections in it wait, so fill
// the slot and commit without blocking. It blocks, like Write, while the
// peer's window is full. Direct mode only.
func (c *Conn) WriteSlot(n int) ([]byte, error) {
	if c.l.ep.cfg.Mode != Direct {
		return nil, c.opErr("write", fmt.Errorf("sock: zero-copy writes need Direct mode: %w", ErrInvalidConfig))
	}
	if n <= 0 {
		return nil, c.opErr("write", ErrSlotMisuse)
	}
	c.wmu.Lock()
	for {
		if err := c.writeErr(); err != nil {
			c.wmu.Unlock()
			return nil, c.opErr("write", err)
		}
		if c.avail() <= 0 {
			if err := c.waitCredit(); err != nil {
				c.wmu.Unlock()
				return nil, c.opErr("write", err)
			}
			continue
		}
		if !c.part.lock(c.closed, nil) {
			continue
		}
		break
	}
	n = min(n, c.l.slice, c.avail())
	pad, err := c.part.waitRoom(recordSize(n), c.wd, c.closed)
	if err != nil {
		c.part.unlock()
		c.wmu.Unlock()
		return nil, c.opErr("write", err)
	}
	r := uint64(c.l.rlay.ringSize)
	off := c.l.rlay.ringOff(c.part.idx) + int((c.part.write+uint64(pad))%r)
	c.slot = c.l.stage.Bytes()[off+hdrSize : off+hdrSize+n : off+hdrSize+n]
	c.slotPad = pad
	return c.slot, nil
}

// CommitSlot sends the first k bytes of the slot WriteSlot returned (k = 0
// sends nothing) and releases the partition.
func (c *Conn) CommitSlot(k int) error {
	if c.slot == nil {
		return c.opErr("write", ErrSlotMisuse)
	}
	if k < 0 || k > len(c.slot) {
		k = -1
	}
	c.slot = nil
	var err error
	if k > 0 {
		err = c.part.post(header{n: k, kind: kindData, id: c.peer}, c.slotPad, nil, nil)
		if err == nil {
			c.sent += uint32(k)
		}
	}
	c.part.unlock()
	c.l.ctrl.ringIfAsleep()
	c.wmu.Unlock()
	switch {
	case k < 0:
		return c.opErr("write", ErrSlotMisuse)
	case err != nil:
		return c.opErr("write", err)
	}
	return nil
}

// Borrow waits, like Read, for data and returns the bytes at the head of
// the receive queue without copying them. They stay valid until Release;
// another Read or Borrow waits until then.
func (c *Conn) Borrow() ([]byte, error) {
	c.rmu.Lock()
	var w waiter
	for {
		c.rxMu.Lock()
		a, _ := c.rxq.peek(c.rxq.len())
		fin, rst := c.finRecv, c.rstRecv
		c.rxMu.Unlock()
		var err error
		switch {
		case c.isClosed.Load():
			err = c.opErr("read", net.ErrClosed)
		case len(a) > 0:
			c.borrowed = len(a)
			return a, nil
		case rst:
			err = c.opErr("read", c.l.failedOr(ErrReset))
		case fin:
			err = io.EOF
		case c.rd.passed():
			err = c.opErr("read", errTimeout)
		}
		if err != nil {
			c.rmu.Unlock()
			return nil, err
		}
		c.awaitData(nil, &w)
	}
}

// Release gives back the first n bytes Borrow returned (they are consumed;
// the rest are returned by the next Read or Borrow) and lets other Reads
// proceed.
func (c *Conn) Release(n int) error {
	if c.borrowed == 0 {
		return c.opErr("read", ErrSlotMisuse)
	}
	bad := n < 0 || n > c.borrowed
	if bad {
		n = 0
	}
	c.borrowed = 0
	c.rxMu.Lock()
	if !c.localClosed {
		c.rxq.discard(n)
	}
	c.rxMu.Unlock()
	err := c.consume(n)
	c.rmu.Unlock()
	switch {
	case bad:
		return c.opErr("read", ErrSlotMisuse)
	case err != nil:
		return c.opErr("read", err)
	}
	return nil
}

package sock

import (
	"fmt"
)

// pollRX takes up to max records from this side's ring p and hands each to
// its connection. The caller holds rxMu. It returns the records taken.
func (p *partition) pollRX(max int) int {
	l := p.l
	if !l.alive() {
		return 0
	}
	win := l.win.Bytes()
	r := uint64(l.lay.ringSize)
	base := l.lay.ringOff(p.idx)
	got := 0
	for got < max {
		pos := p.read % r
		off := base + int(pos)
		w := load64(win, off)
		if w == 0 {
			break
		}
		raceAcquire()
		h, err := decodeHeader(w, min(l.lay.ringSize/4, hdrMaxLen))
		if err != nil {
			l.fail(fmt.Errorf("sock: partition %d at %d: %w", p.idx, p.read, err))
			return got
		}
		if h.kind == kindPad {
			if pos == 0 {
				l.fail(fmt.Errorf("sock: partition %d: %w: pad at the ring's start", p.idx, ErrProtocol))
				return got
			}
			store64(win, off, 0)
			p.read += r - pos
			p.syncWant = p.syncWant || h.sync
			continue
		}
		rec := recordSize(h.n)
		if pos+uint64(rec) > r {
			l.fail(fmt.Errorf("sock: partition %d: %w: record of %d bytes crosses the ring's end", p.idx, ErrProtocol, h.n))
			return got
		}
		if c := l.lookup(h.id); c != nil {
			c.deliver(h, win[off+hdrSize:off+hdrSize+h.n])
		}
		store64(win, off, 0)
		p.read += uint64(rec)
		p.syncWant = p.syncWant || h.sync
		got++
	}
	if p.syncWant {
		p.syncWant = false
		l.ctrl.writeShadow(p.idx, p.read)
	}
	return got
}

// tryPoll polls ring p if no other goroutine is; it returns the records
// taken.
func (p *partition) tryPoll(max int) int {
	if !p.rxMu.TryLock() {
		return 0
	}
	defer p.rxMu.Unlock()
	return p.pollRX(max)
}

// pollAll drains every ring and the control ring; the doorbell loop and
// parking goroutines call it.
func (l *link) pollAll() {
	for _, p := range l.parts {
		p.rxMu.Lock()
		if p.pollRX(1<<30) > 0 {
			// In SP2C the partition's RX goroutine may be asleep: more
			// records are likely; let it poll.
			signal(p.rxWake)
			if l.ep.cfg.Mode == SPSC {
				signal(p.sched.wake)
			}
		}
		p.rxMu.Unlock()
		p.spaceWait.broadcast()
	}
	l.ctrl.pollCreditsAll()
}

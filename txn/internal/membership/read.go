package membership

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
)

// Read is a linearizable read of the configuration (raft's ReadIndex):
// the configuration this member applied at a point between the call and
// its return at which it was the group's newest, and how long before the
// return the member applied it (its age). A member cut from the leader
// has no such point: Read waits, up to ctx.
func (m *Member) Read(ctx context.Context) (Configuration, time.Duration, error) {
	for {
		c, age, err := m.readOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return c, age, err
		}
		select {
		case <-m.stop:
			return Configuration{}, 0, ErrClosed
		default:
		}
	}
}

// readOnce asks raft for a read index once, bounded by an election
// timeout (a request without a leader is dropped), and waits until this
// member applied it.
func (m *Member) readOnce(ctx context.Context) (Configuration, time.Duration, error) {
	m.mu.Lock()
	m.readSeq++
	id := m.readSeq
	ch := make(chan uint64, 1)
	m.reads[id] = ch
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.reads, id)
		m.mu.Unlock()
	}()
	one, cancel := context.WithTimeout(ctx, m.cfg.Tick*electionTicks)
	defer cancel()
	if err := m.rn.ReadIndex(one, binary.LittleEndian.AppendUint64(nil, id)); err != nil {
		return Configuration{}, 0, fmt.Errorf("membership: read index: %w", err)
	}
	var index uint64
	select {
	case index = <-ch:
	case <-one.Done():
		return Configuration{}, 0, fmt.Errorf("membership: read index: %w", one.Err())
	case <-m.stop:
		return Configuration{}, 0, ErrClosed
	}
	t := time.NewTicker(m.cfg.Tick / 4)
	defer t.Stop()
	for {
		m.mu.Lock()
		if m.applied >= index {
			c, at := m.conf.Clone(), m.appliedAt
			m.mu.Unlock()
			return c, time.Since(at), nil
		}
		m.mu.Unlock()
		select {
		case <-t.C:
		case <-one.Done():
			return Configuration{}, 0, fmt.Errorf("membership: applying to the read index: %w", one.Err())
		case <-m.stop:
			return Configuration{}, 0, ErrClosed
		}
	}
}

// readDone hands a read index to the read waiting for it.
func (m *Member) readDone(rs raft.ReadState) {
	if len(rs.RequestCtx) != 8 {
		return
	}
	m.mu.Lock()
	ch := m.reads[binary.LittleEndian.Uint64(rs.RequestCtx)]
	m.mu.Unlock()
	if ch != nil {
		select {
		case ch <- rs.Index:
		default:
		}
	}
}

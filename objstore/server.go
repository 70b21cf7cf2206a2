package objstore

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// startSession greets a new client (the hello frame carries the arena's
// fd) and starts its reader and writer.
func (s *Store) startSession(conn *net.UnixConn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.nextSession++
	c := newSession(s, s.nextSession, conn)
	s.sessions[c] = struct{}{}
	s.sessWG.Add(2)
	s.mu.Unlock()

	hello := newFrame(nil, msgHello, 0).u32(protocolVersion).u64(uint64(s.alloc.size)).u64(uint64(s.cfg.MaxObjectSize)).done()
	if _, _, err := conn.WriteMsgUnix(hello, unix.UnixRights(s.arena.fd), nil); err != nil {
		s.log.Debug("objstore: greet client", "client", c.id, "err", err)
		c.close()
	}
	s.log.Debug("objstore: client connected", "client", c.id)
	go func() {
		defer s.sessWG.Done()
		c.writer()
	}()
	go func() {
		defer s.sessWG.Done()
		s.read(c)
	}()
}

// read reads c's requests and serves them until the connection ends or
// c sends something malformed, then cleans up after c.
func (s *Store) read(c *session) {
	defer func() {
		c.close()
		s.mu.Lock()
		s.dropSession(c)
		s.mu.Unlock()
		s.log.Debug("objstore: client gone", "client", c.id)
	}()
	br := bufio.NewReaderSize(c.conn, 64<<10)
	var (
		buf []byte
		req request
	)
	for {
		h, b, nbuf, err := readFrame(br, buf, maxRequestFrame)
		buf = nbuf
		if err == nil {
			err = decodeRequest(h, b, &req)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("objstore: dropping client", "client", c.id, "err", err)
			}
			return
		}
		if req.typ == msgCancel {
			s.cancel(c, req.reqID)
			continue
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.done:
			return
		}
		s.serve(c, &req)
	}
}

// serve answers one admitted request (now, or later for a blocked Get
// or a Fetch).
func (s *Store) serve(c *session, r *request) {
	if r.typ == msgFetch {
		s.fetch(c, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	switch r.typ {
	case msgCreate:
		var e *entry
		if e, err = s.create(c, r.id, r.dataSize, int64(len(r.meta)), r.meta); err == nil {
			c.send(newFrame(nil, msgCreate|replyBit, r.reqID).u8(0).u64(uint64(e.off)).done())
			return
		}
	case msgSeal:
		err = s.seal(c, r.id)
	case msgAbort:
		err = s.abort(c, r.id)
	case msgRelease:
		err = s.release(c, r.id)
	case msgGet:
		var reply []byte
		if reply, err = s.get(c, r.reqID, r.ids, r.timeout, nil); err == nil {
			if reply != nil {
				c.send(reply)
			}
			return
		}
	case msgDelete:
		f := newFrame(nil, msgDelete|replyBit, r.reqID).u8(0).u32(uint32(len(r.ids)))
		for _, id := range r.ids {
			f = f.u8(statusOf(s.remove(id)))
		}
		c.send(f.done())
		return
	case msgContains:
		present := byte(0)
		if s.contains(r.id) {
			present = 1
		}
		c.send(newFrame(nil, msgContains|replyBit, r.reqID).u8(0).u8(present).done())
		return
	case msgList:
		c.send(encodeList(r.reqID, s.list()))
		return
	case msgSubscribe:
		if _, dup := c.subs[r.reqID]; !dup {
			c.subs[r.reqID] = struct{}{}
			s.subscribed[c] = struct{}{}
			s.subscribers++
		}
	}
	c.send(statusReply(r.typ, r.reqID, err))
}

// cancel ends c's request reqID if it is still running: a blocked Get
// is answered with context.Canceled, a Fetch's context is cancelled, a
// subscription stops.
func (s *Store) cancel(c *session, reqID uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelWait(c, reqID) {
		return
	}
	if cancel, ok := c.fetches[reqID]; ok {
		cancel()
		return
	}
	if _, ok := c.subs[reqID]; ok {
		delete(c.subs, reqID)
		s.subscribers--
		if len(c.subs) == 0 {
			delete(s.subscribed, c)
		}
	}
}

// notify tells every subscription that id was sealed.
func (s *Store) notify(id ID) {
	for c := range s.subscribed {
		c.notify(id)
	}
}

// fetch runs a Fetch in its own goroutine (it may take long) and answers
// with one status per ID.
func (s *Store) fetch(c *session, r *request) {
	ids := append([]ID(nil), r.ids...)
	ctx, cancel := context.WithCancel(c.ctx)
	s.mu.Lock()
	c.fetches[r.reqID] = cancel
	s.fetches++
	s.mu.Unlock()
	reqID := r.reqID
	go func() {
		defer cancel()
		errs := s.fetchIDs(ctx, ids)
		s.mu.Lock()
		delete(c.fetches, reqID)
		s.fetches--
		s.mu.Unlock()
		f := newFrame(nil, msgFetch|replyBit, reqID).u8(0).u32(uint32(len(ids)))
		for _, err := range errs {
			f = f.u8(fetchStatus(err))
		}
		c.send(f.done())
	}()
}

// fetchIDs makes ids present: those already sealed here are, the others
// come from cfg.Fetcher (or fail with ErrUnavailable without one).
func (s *Store) fetchIDs(ctx context.Context, ids []ID) []error {
	errs := make([]error, len(ids))
	var want []ID
	var at []int
	s.mu.Lock()
	for i, id := range ids {
		if !s.contains(id) {
			want = append(want, id)
			at = append(at, i)
		}
	}
	s.mu.Unlock()
	if len(want) == 0 {
		return errs
	}
	if s.cfg.Fetcher == nil {
		for _, i := range at {
			errs[i] = ErrUnavailable
		}
		return errs
	}
	got := s.cfg.Fetcher.Fetch(ctx, want, s.Sink())
	for j, i := range at {
		if j < len(got) {
			errs[i] = got[j]
		} else {
			errs[i] = ErrUnavailable
		}
	}
	return errs
}

// fetchStatus is the status of a Fetcher's error: what the Fetcher
// contract names (ErrUnavailable, ErrStoreFull, a context error) wins
// over what else the error wraps.
func fetchStatus(err error) byte {
	for _, e := range []error{ErrUnavailable, ErrStoreFull, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return statusOf(e)
		}
	}
	return statusOf(err)
}

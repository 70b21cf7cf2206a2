package transfer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// The TCP baselines (TCP4K, TCPBulk) use the same request/reply framing
// as Plasma's manager, over a plain TCP connection:
//
//	request  type u8 (1, TRANSFER) | mode u8 (TCP4K or TCPBulk) | id [20]
//	reply    status u8 (0 found, 1 not found) | dataSize u64 | metaSize u64
//	         then dataSize+metaSize bytes of object
//
// TCP4K writes and reads at most 4096 bytes per call, straight from the
// pinned object and into the created one; TCPBulk writes the object in
// one call and io.ReadFull's it, over 4 MiB socket buffers. A connection
// serves one transfer at a time and is reused for the next.
const (
	tcpRequestLen = 2 + object.IDSize
	tcpReplyLen   = 1 + 8 + 8
	tcpChunk      = 4096
	tcpBulkBuffer = 4 << 20
	tcpTransfer   = 1
)

// tcpPool keeps a fetcher's idle connections by holder address.
type tcpPool struct {
	cfg    *Config
	mu     sync.Mutex
	idle   map[string][]net.Conn
	closed bool
}

func (t *tcpPool) init(cfg *Config) {
	t.cfg = cfg
	t.idle = map[string][]net.Conn{}
}

// get returns an idle connection to peer or dials one.
func (t *tcpPool) get(ctx context.Context, peer string, proto Protocol) (net.Conn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, object.ErrClosed
	}
	if cs := t.idle[peer]; len(cs) > 0 {
		c := cs[len(cs)-1]
		t.idle[peer] = cs[:len(cs)-1]
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", peer)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", object.ErrUnavailable, peer, err)
	}
	if tc, ok := c.(*net.TCPConn); ok && proto == TCPBulk {
		_ = tc.SetReadBuffer(tcpBulkBuffer)
		_ = tc.SetWriteBuffer(tcpBulkBuffer)
	}
	return c, nil
}

// put returns a connection that finished a transfer cleanly.
func (t *tcpPool) put(peer string, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.idle[peer]) >= t.cfg.Concurrency {
		_ = c.Close()
		return
	}
	t.idle[peer] = append(t.idle[peer], c)
}

func (t *tcpPool) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, cs := range t.idle {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	clear(t.idle)
}

// tcpFetch moves id from the holder at peer over TCP.
func (f *Fetcher) tcpFetch(ctx context.Context, peer string, id object.ID, sink object.Sink, proto Protocol) (Protocol, int, error) {
	c, err := f.tcp.get(ctx, peer, proto)
	if err != nil {
		return 0, 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	n, reuse, err := tcpExchange(c, id, sink, proto)
	if !stop() {
		reuse = false
		if err != nil {
			err = errors.Join(ctx.Err(), err)
		}
	}
	if reuse {
		f.tcp.put(peer, c)
	} else {
		_ = c.Close()
	}
	if err != nil {
		return 0, 0, err
	}
	return proto, n, nil
}

// tcpExchange runs one transfer on c; reuse says whether c is still in
// step for the next one.
func tcpExchange(c net.Conn, id object.ID, sink object.Sink, proto Protocol) (int, bool, error) {
	var req [tcpRequestLen]byte
	req[0], req[1] = tcpTransfer, byte(proto)
	copy(req[2:], id[:])
	if _, err := c.Write(req[:]); err != nil {
		return 0, false, fmt.Errorf("%w: send request: %w", object.ErrUnavailable, err)
	}
	var rep [tcpReplyLen]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		return 0, false, fmt.Errorf("%w: read reply: %w", object.ErrUnavailable, err)
	}
	switch rep[0] {
	case 0:
	case 1:
		return 0, true, fmt.Errorf("%w: at %s", object.ErrNotFound, c.RemoteAddr())
	default:
		return 0, false, protoErr("TCP reply status %d", rep[0])
	}
	dSize, mSize := binary.LittleEndian.Uint64(rep[1:9]), binary.LittleEndian.Uint64(rep[9:17])
	if dSize > maxObjectLen || mSize > maxObjectLen-dSize {
		return 0, false, protoErr("TCP reply of %d+%d bytes", dSize, mSize)
	}
	total := int64(dSize + mSize)
	dst, commit, abort, err := sink.Create(id, int(dSize), int(mSize))
	if err == nil && int64(len(dst)) != total {
		abort()
		err = fmt.Errorf("transfer: sink created %d bytes for an object of %d", len(dst), total)
	}
	if err != nil {
		_, derr := io.CopyN(io.Discard, c, total)
		return 0, derr == nil, err
	}
	if proto == TCP4K {
		for off := 0; off < len(dst); {
			n, rerr := c.Read(dst[off:min(off+tcpChunk, len(dst))])
			off += n
			if rerr != nil && off < len(dst) {
				err = rerr
				break
			}
		}
	} else {
		_, err = io.ReadFull(c, dst)
	}
	if err != nil {
		abort()
		return 0, false, fmt.Errorf("%w: read object: %w", object.ErrUnavailable, err)
	}
	if err := commit(); err != nil {
		return 0, true, fmt.Errorf("transfer: seal fetched object: %w", err)
	}
	return len(dst), true, nil
}

// serveTCP answers one connection's requests until it ends.
func (s *Server) serveTCP(c net.Conn) {
	defer s.wg.Done()
	defer s.untrack(c)
	bulk := false
	var req [tcpRequestLen]byte
	var rep [tcpReplyLen]byte
	for {
		_ = c.SetDeadline(time.Time{})
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		mode := Protocol(req[1])
		if req[0] != tcpTransfer || (mode != TCP4K && mode != TCPBulk) {
			s.log.Warn("transfer: bad TCP request", "peer", c.RemoteAddr().String(), "type", req[0], "mode", req[1])
			return
		}
		if mode == TCPBulk && !bulk {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(tcpBulkBuffer)
				_ = tc.SetWriteBuffer(tcpBulkBuffer)
			}
			bulk = true
		}
		var id object.ID
		copy(id[:], req[2:])
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.FinTimeout))
		obj, dataSize, release, err := s.src.Pin(id)
		if err != nil {
			s.stats.notFound.Add(1)
			rep = [tcpReplyLen]byte{1}
			if _, err := c.Write(rep[:]); err != nil {
				return
			}
			continue
		}
		s.stats.pins.Add(1)
		err = s.writeObject(c, mode, obj, dataSize, &rep)
		release()
		s.stats.pins.Add(-1)
		if err != nil {
			s.stats.failed.Add(1)
			return
		}
		s.stats.done(mode, len(obj))
	}
}

// writeObject writes the reply header and the object.
func (s *Server) writeObject(c net.Conn, mode Protocol, obj []byte, dataSize int, rep *[tcpReplyLen]byte) error {
	rep[0] = 0
	binary.LittleEndian.PutUint64(rep[1:9], uint64(dataSize))
	binary.LittleEndian.PutUint64(rep[9:17], uint64(len(obj)-dataSize))
	if _, err := c.Write(rep[:]); err != nil {
		return err
	}
	if mode == TCPBulk {
		_, err := c.Write(obj)
		return err
	}
	for off := 0; off < len(obj); off += tcpChunk {
		if _, err := c.Write(obj[off:min(off+tcpChunk, len(obj))]); err != nil {
			return err
		}
	}
	return nil
}

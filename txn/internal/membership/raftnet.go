package membership

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// raftNet carries the membership's raft messages between the nodes: one
// TCP connection per ordered pair, opened by the sender, each starting
// with a hello (u8 token length | token | u32 sender's index) that the
// receiver checks against its own token, then frames (u32 length |
// raftpb.Message), each at most maxRaftFrame bytes. A hello whose index
// is queryFrom is a client's configuration query (query.go): one answer,
// then the connection ends. Messages are
// dropped, never queued without bound, when a peer is slow or down:
// raft sends them again.
type raftNet struct {
	self  int
	addrs []string
	token string
	log   *slog.Logger
	ln    net.Listener
	step  func(raftpb.Message)                      // hands a received message to raft
	heard func(from int)                            // notes that a peer spoke
	query func(ctx context.Context) ([]byte, error) // answers a client's query

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // accepted, closed with the net
	out    []chan raftpb.Message // per peer, drained by its sender
}

// Bounds of the membership's transport.
const (
	maxRaftFrame = 1 << 20
	raftQueue    = 256
	raftDial     = time.Second
)

// errRaftHello: a connection that did not present the token.
var errRaftHello = errors.New("membership: bad hello")

// listenRaft starts the transport of node self, listening on ln, or
// on addrs[self] when ln is nil.
func listenRaft(self int, addrs []string, ln net.Listener, token string, log *slog.Logger, step func(raftpb.Message), heard func(int),
	query func(context.Context) ([]byte, error)) (*raftNet, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addrs[self]); err != nil {
			return nil, fmt.Errorf("membership: %w", err)
		}
	}
	t := &raftNet{self: self, addrs: addrs, token: token, log: log, ln: ln, step: step, heard: heard, query: query,
		conns: map[net.Conn]struct{}{}, out: make([]chan raftpb.Message, len(addrs))}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for i := range addrs {
		if i == self {
			continue
		}
		t.out[i] = make(chan raftpb.Message, raftQueue)
		t.wg.Add(1)
		go t.sender(i)
	}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// send queues m for its destination, dropping it when the queue is full.
func (t *raftNet) send(m raftpb.Message) {
	to := int(m.To) - 1
	if to < 0 || to >= len(t.out) || t.out[to] == nil {
		return
	}
	select {
	case t.out[to] <- m:
	default:
	}
}

// sender writes the messages queued for peer i, dialing it when needed.
func (t *raftNet) sender(i int) {
	defer t.wg.Done()
	var c net.Conn
	var w *bufio.Writer
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var buf []byte
	for {
		var m raftpb.Message
		select {
		case <-t.ctx.Done():
			return
		case m = <-t.out[i]:
		}
		if c == nil {
			d := net.Dialer{Timeout: raftDial}
			var err error
			if c, err = d.DialContext(t.ctx, "tcp", t.addrs[i]); err != nil {
				continue // dropped: raft retries
			}
			w = bufio.NewWriter(c)
			hello := append([]byte{byte(len(t.token))}, t.token...)
			w.Write(binary.LittleEndian.AppendUint32(hello, uint32(t.self)))
		}
		size := m.Size()
		if size > maxRaftFrame {
			t.log.Warn("membership: message too large; dropped", "bytes", size)
			continue
		}
		buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(size))
		buf = append(buf, make([]byte, size)...)
		if _, err := m.MarshalTo(buf[4:]); err != nil {
			continue
		}
		w.Write(buf)
		var err error
		if len(t.out[i]) == 0 { // a batch ends: one write
			c.SetWriteDeadline(time.Now().Add(raftDial))
			err = w.Flush()
		}
		if err != nil {
			c.Close()
			c, w = nil, nil
		}
	}
}

// accept serves incoming connections until the net closes.
func (t *raftNet) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.ctx.Err() != nil {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if err := t.receive(c); err != nil && t.ctx.Err() == nil && !errors.Is(err, io.EOF) {
				t.log.Debug("membership: connection ended", "err", err)
			}
			t.mu.Lock()
			delete(t.conns, c)
			t.mu.Unlock()
			c.Close()
		}()
	}
}

// receive checks a connection's hello, then hands its messages to raft.
func (t *raftNet) receive(c net.Conn) error {
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(raftDial))
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	hello := make([]byte, int(n[0])+4)
	if _, err := io.ReadFull(r, hello); err != nil {
		return err
	}
	from := int(binary.LittleEndian.Uint32(hello[n[0]:]))
	if subtle.ConstantTimeCompare(hello[:n[0]], []byte(t.token)) != 1 {
		return errRaftHello
	}
	if from == queryFrom {
		return t.answer(c)
	}
	if from == t.self || from >= len(t.addrs) {
		return errRaftHello
	}
	c.SetReadDeadline(time.Time{})
	var buf []byte
	for {
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		size := int(binary.LittleEndian.Uint32(h[:]))
		if size > maxRaftFrame {
			return fmt.Errorf("%w: a %d-byte membership frame", ErrProtocol, size)
		}
		buf = append(buf[:0], make([]byte, size)...)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		var m raftpb.Message
		if err := m.Unmarshal(buf); err != nil {
			return fmt.Errorf("%w: membership message: %w", ErrProtocol, err)
		}
		if int(m.From) != from+1 || int(m.To) != t.self+1 {
			return fmt.Errorf("%w: a membership message from %d to %d on node %d's connection", ErrProtocol, m.From, m.To, from)
		}
		t.heard(from)
		t.step(m)
	}
}

// close stops the transport and waits for its goroutines.
func (t *raftNet) close() {
	t.mu.Lock()
	t.cancel()
	t.ln.Close()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

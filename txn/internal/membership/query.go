package membership

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// A client's query of the configuration, on a member's membership
// address: the client sends the hello of a peer whose index is
// queryFrom; the member answers one frame and ends the connection:
//
//	u32 length | u8 status: 0 ok, 1 error | ok: u64 age (ns) | u16 configuration length | configuration | params
//	                                       error: its text
//
// The configuration is a linearizable read (Member.Read), so a client
// that sent its query at t holds a configuration that was the newest at
// some point after t.
const (
	queryFrom     = 0xffffffff
	maxQueryReply = 64 << 10
)

// ErrQuery: a member answered a query with an error (no leader in time).
var ErrQuery = errors.New("membership: query refused")

// Answer is a member's answer to a query.
type Answer struct {
	Configuration
	// Age is how long before its answer the member applied the
	// configuration.
	Age time.Duration
	// Params are the members' Config.Params.
	Params []byte
}

// answer is the query's reply of m, computed within ctx.
func (m *Member) answer(ctx context.Context) ([]byte, error) {
	c, age, err := m.Read(ctx)
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint64([]byte{0}, uint64(age))
	conf := c.Marshal()
	b = binary.LittleEndian.AppendUint16(b, uint16(len(conf)))
	b = append(b, conf...)
	return append(b, m.cfg.Params...), nil
}

// answer serves a query connection: one reply, bounded by raftDial
// times 4 (a read without a leader gives up).
func (t *raftNet) answer(c net.Conn) error {
	ctx, cancel := context.WithTimeout(t.ctx, 4*raftDial)
	defer cancel()
	reply, err := t.query(ctx)
	if err != nil {
		reply = append([]byte{1}, err.Error()...)
	}
	if len(reply) > maxQueryReply {
		return fmt.Errorf("%w: a %d-byte answer", ErrProtocol, len(reply))
	}
	c.SetWriteDeadline(time.Now().Add(raftDial))
	_, err = c.Write(append(binary.LittleEndian.AppendUint32(nil, uint32(len(reply))), reply...))
	return err
}

// Query asks the member at addr (its membership address) for the
// configuration, presenting token.
func Query(ctx context.Context, addr, token string) (Answer, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Answer{}, fmt.Errorf("membership: query %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	hello := append([]byte{byte(len(token))}, token...)
	if _, err := c.Write(binary.LittleEndian.AppendUint32(hello, queryFrom)); err != nil {
		return Answer{}, fmt.Errorf("membership: query %s: %w", addr, err)
	}
	r := bufio.NewReader(c)
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Answer{}, fmt.Errorf("membership: query %s: %w", addr, err)
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n == 0 || n > maxQueryReply {
		return Answer{}, fmt.Errorf("%w: a %d-byte answer", ErrProtocol, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return Answer{}, fmt.Errorf("membership: query %s: %w", addr, err)
	}
	return decodeAnswer(b)
}

// decodeAnswer decodes an answer's frame.
func decodeAnswer(b []byte) (Answer, error) {
	if b[0] != 0 {
		return Answer{}, fmt.Errorf("%w: %s", ErrQuery, b[1:])
	}
	if len(b) < 11 {
		return Answer{}, fmt.Errorf("%w: a short answer", ErrProtocol)
	}
	age := binary.LittleEndian.Uint64(b[1:])
	n := int(binary.LittleEndian.Uint16(b[9:]))
	if len(b) < 11+n || age > uint64(1<<62) {
		return Answer{}, fmt.Errorf("%w: a short answer", ErrProtocol)
	}
	c, err := Unmarshal(b[11 : 11+n])
	if err != nil {
		return Answer{}, err
	}
	return Answer{Configuration: c, Age: time.Duration(age), Params: append([]byte(nil), b[11+n:]...)}, nil
}

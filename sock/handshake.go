package sock

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The control stream of a link (a Unix socket for shm, a TCP connection
// for tcp — the thesis' NTM channel) carries length-prefixed messages:
// u32 length, then the body, whose first byte is the message type. Link
// set-up is PREFACE → HELLO → WELCOME → READY (PREFACE tells the dialer
// the listener's partition count, which the link adopts); each connection is SYN → SYNACK or REJECT.
// Records and teardown (FIN, RST) travel in the rings, in order with the
// data.
const (
	msgHello   = 1
	msgWelcome = 2
	msgSyn     = 3
	msgSynAck  = 4
	msgReject  = 5
	msgReady   = 6 // the dialer's QPs are connected: the listener may write
	msgPreface = 7 // the listener's partition count, before HELLO

	helloMagic   = "RKSOCK2\x00"
	maxCtlMsg    = 4096
	maxStringLen = 255
)

// linkParams is what each side of a link tells the other in HELLO / WELCOME.
type linkParams struct {
	transport string // verbs transport of the device: "shm", "tcp"
	device    string // device address for verbs.ConnectRC
	app       string // application name (sockd quotas); may be empty
	winAddr   uint64 // window MR address
	winRKey   uint32
	ringSize  uint32 // bytes of each ring in the sender's window
	parts     uint8  // rings in the sender's window
	mtu       uint32 // largest record payload the sender accepts
	qpns      []uint32
}

type synMsg struct {
	dialer  connID
	rcvbuf  uint32
	service string // what the dialer asked for (name or port)
}

type synAckMsg struct {
	dialer, acceptor connID
	rcvbuf           uint32
	part             uint8
}

type rejectMsg struct {
	dialer connID
	code   uint8
	reason string
}

const (
	rejBacklog = 1 // the listener's accept queue is full
	rejClosing = 2 // the listener is closing
	rejPolicy  = 3 // refused by policy (sockd quota or allow-list)
	rejSlots   = 4 // no connection slot free on the link
)

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) {
	if len(s) > maxStringLen {
		s = s[:maxStringLen]
	}
	e.u8(uint8(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) id(c connID) { e.u16(c.slot); e.u16(c.gen) }

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: control message truncated", ErrProtocol)
		return false
	}
	return true
}
func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}
func (d *decoder) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.LittleEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}
func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}
func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}
func (d *decoder) str() string {
	n := int(d.u8())
	if !d.need(n) {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
func (d *decoder) id() connID {
	c := connID{slot: d.u16(), gen: d.u16()}
	if c.gen > hdrGenMask && d.err == nil {
		d.err = fmt.Errorf("%w: generation %d", ErrProtocol, c.gen)
	}
	return c
}
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes in a control message", ErrProtocol, len(d.b))
	}
	return d.err
}

func encodeParams(typ uint8, p *linkParams) []byte {
	e := encoder{b: make([]byte, 0, 128)}
	e.u8(typ)
	e.b = append(e.b, helloMagic...)
	e.str(p.transport)
	e.str(p.device)
	e.str(p.app)
	e.u64(p.winAddr)
	e.u32(p.winRKey)
	e.u32(p.ringSize)
	e.u8(p.parts)
	e.u32(p.mtu)
	e.u8(uint8(len(p.qpns)))
	for _, q := range p.qpns {
		e.u32(q)
	}
	return e.b
}

// decodeParams decodes a HELLO or WELCOME body (after its type byte) and
// checks that the window it describes is one this side can use.
func decodeParams(b []byte) (*linkParams, error) {
	d := decoder{b: b}
	if !d.need(len(helloMagic)) || string(d.b[:len(helloMagic)]) != helloMagic {
		return nil, fmt.Errorf("%w: not an rdmakit sock peer", ErrProtocol)
	}
	d.b = d.b[len(helloMagic):]
	p := &linkParams{transport: d.str(), device: d.str(), app: d.str()}
	p.winAddr = d.u64()
	p.winRKey = d.u32()
	p.ringSize = d.u32()
	p.parts = d.u8()
	p.mtu = d.u32()
	n := int(d.u8())
	for i := 0; i < n && d.err == nil; i++ {
		p.qpns = append(p.qpns, d.u32())
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	switch {
	case p.parts < 1 || p.parts > MaxPartitions:
		return nil, fmt.Errorf("%w: %d partitions", ErrProtocol, p.parts)
	case p.ringSize < 64<<10 || p.ringSize&(p.ringSize-1) != 0 || p.ringSize > 1<<30:
		return nil, fmt.Errorf("%w: ring size %d", ErrProtocol, p.ringSize)
	case p.mtu < 64 || p.mtu > p.ringSize/4 || p.mtu > hdrMaxLen:
		return nil, fmt.Errorf("%w: MTU %d", ErrProtocol, p.mtu)
	case len(p.qpns) != int(p.parts)+2: // the partitions', the control QP, the doorbell QP
		return nil, fmt.Errorf("%w: %d QPs for %d partitions", ErrProtocol, len(p.qpns), p.parts)
	case p.device == "" || p.transport == "":
		return nil, fmt.Errorf("%w: no device", ErrProtocol)
	}
	return p, nil
}

func encodeSyn(m *synMsg) []byte {
	e := encoder{b: make([]byte, 0, 16+len(m.service))}
	e.u8(msgSyn)
	e.id(m.dialer)
	e.u32(m.rcvbuf)
	e.str(m.service)
	return e.b
}

func decodeSyn(b []byte) (*synMsg, error) {
	d := decoder{b: b}
	m := &synMsg{dialer: d.id(), rcvbuf: d.u32(), service: d.str()}
	if err := d.end(); err != nil {
		return nil, err
	}
	if m.rcvbuf == 0 || m.rcvbuf > 1<<30 {
		return nil, fmt.Errorf("%w: receive buffer %d", ErrProtocol, m.rcvbuf)
	}
	return m, nil
}

func encodeSynAck(m *synAckMsg) []byte {
	e := encoder{b: make([]byte, 0, 16)}
	e.u8(msgSynAck)
	e.id(m.dialer)
	e.id(m.acceptor)
	e.u32(m.rcvbuf)
	e.u8(m.part)
	return e.b
}

func decodeSynAck(b []byte) (*synAckMsg, error) {
	d := decoder{b: b}
	m := &synAckMsg{dialer: d.id(), acceptor: d.id(), rcvbuf: d.u32(), part: d.u8()}
	if err := d.end(); err != nil {
		return nil, err
	}
	if m.rcvbuf == 0 || m.rcvbuf > 1<<30 {
		return nil, fmt.Errorf("%w: receive buffer %d", ErrProtocol, m.rcvbuf)
	}
	return m, nil
}

func encodeReject(m *rejectMsg) []byte {
	e := encoder{b: make([]byte, 0, 16+len(m.reason))}
	e.u8(msgReject)
	e.id(m.dialer)
	e.u8(m.code)
	e.str(m.reason)
	return e.b
}

func decodeReject(b []byte) (*rejectMsg, error) {
	d := decoder{b: b}
	m := &rejectMsg{dialer: d.id(), code: d.u8(), reason: d.str()}
	return m, d.end()
}

// writeMsg writes one length-prefixed message.
func writeMsg(w io.Writer, body []byte) error {
	buf := make([]byte, 4+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	_, err := w.Write(buf)
	return err
}

// readMsg reads one message into buf (at least maxCtlMsg bytes) and returns
// its body; a length of zero or over maxCtlMsg is a protocol error.
func readMsg(r io.Reader, buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(buf)
	if n == 0 || n > maxCtlMsg {
		return nil, fmt.Errorf("%w: control message of %d bytes", ErrProtocol, n)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf[:n], nil
}

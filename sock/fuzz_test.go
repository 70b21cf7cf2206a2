package sock

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// The decoders read what a peer wrote: a record header or a credit entry
// from this side's window, a control message from the control stream. A
// hostile peer chooses every byte, so each decoder must return a typed error
// (wrapping ErrProtocol) for what no honest encoder writes, never panic, and
// accept exactly what the encoders produce.

// fuzzMax maps an arbitrary fuzzed int to a record size bound a link can have.
func fuzzMax(m uint32) int { return 64 + int(m%uint32(hdrMaxLen-63)) }

func FuzzDecodeHeader(f *testing.F) {
	for _, h := range []header{
		{n: 1, kind: kindData, id: connID{slot: 0, gen: 1}},
		{n: DefaultMTU, kind: kindData, sync: true, id: connID{slot: 65535, gen: hdrGenMask}},
		{kind: kindFin, id: connID{slot: 7, gen: 3}},
		{kind: kindRst, sync: true, id: connID{slot: 1, gen: 2}},
		{kind: kindPad},
	} {
		f.Add(h.encode(), uint32(DefaultMTU))
	}
	f.Add(uint64(0), uint32(0))
	f.Add(uint64(1)<<63|7<<hdrKindShft, uint32(64))
	f.Add(uint64(1)<<63|uint64(kindData)<<hdrKindShft|65, uint32(0))
	f.Fuzz(func(t *testing.T, w uint64, m uint32) {
		limit := fuzzMax(m)
		h, err := decodeHeader(w, limit)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("decodeHeader(%#x): untyped error %v", w, err)
			}
			return
		}
		switch h.kind {
		case kindData:
			if h.n < 1 || h.n > limit {
				t.Fatalf("decodeHeader(%#x) accepted a data record of %d bytes (at most %d)", w, h.n, limit)
			}
		case kindFin, kindRst:
			if h.n != 0 {
				t.Fatalf("decodeHeader(%#x) accepted a %v record of %d bytes", w, h.kind, h.n)
			}
		case kindPad:
		default:
			t.Fatalf("decodeHeader(%#x) accepted kind %v", w, h.kind)
		}
		if h.id.gen > hdrGenMask {
			t.Fatalf("decodeHeader(%#x): generation %d", w, h.id.gen)
		}
		if got := h.encode(); got != w {
			t.Fatalf("decodeHeader(%#x) = %+v, which encodes to %#x", w, h, got)
		}
	})
}

func FuzzDecodeCredit(f *testing.F) {
	f.Add(encodeCredit(connID{slot: 3, gen: 9}, 1<<20))
	f.Add(encodeCredit(connID{slot: 65535, gen: hdrGenMask}, ^uint32(0)))
	f.Add(uint64(0))
	f.Add(uint64(1))
	f.Fuzz(func(t *testing.T, w uint64) {
		id, limit, ok := decodeCredit(w)
		if ok != (w&hdrValid != 0) {
			t.Fatalf("decodeCredit(%#x): ok = %v", w, ok)
		}
		if !ok {
			return
		}
		if id.gen > hdrGenMask {
			t.Fatalf("decodeCredit(%#x): generation %d", w, id.gen)
		}
		if got := encodeCredit(id, limit); got != w {
			t.Fatalf("decodeCredit(%#x) = %+v %d, which encodes to %#x", w, id, limit, got)
		}
	})
}

func FuzzDecodeParams(f *testing.F) {
	good := linkParams{
		transport: "shm", device: "shm://sock-1-2", app: "web",
		winAddr: 1 << 40, winRKey: 7, ringSize: DefaultRingSize, parts: 2, mtu: DefaultMTU,
		qpns: []uint32{10, 11, 12},
	}
	f.Add(encodeParams(msgHello, &good)[1:])
	one := good
	one.transport, one.device, one.app = "tcp", "tcp://127.0.0.1:4000", ""
	one.parts, one.qpns, one.ringSize, one.mtu = 1, []uint32{1, 2}, 64<<10, 16<<10
	f.Add(encodeParams(msgWelcome, &one)[1:])
	bad := good
	bad.qpns = bad.qpns[:1]
	f.Add(encodeParams(msgHello, &bad)[1:])
	f.Add([]byte(helloMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeParams(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
			if p != nil {
				t.Fatalf("error %v with params %+v", err, p)
			}
			return
		}
		switch {
		case p.parts < 1 || p.parts > MaxPartitions,
			p.ringSize < 64<<10 || p.ringSize&(p.ringSize-1) != 0 || p.ringSize > 1<<30,
			p.mtu < 64 || int(p.mtu) > int(p.ringSize)/4 || p.mtu > hdrMaxLen,
			len(p.qpns) != int(p.parts)+1,
			p.device == "", p.transport == "":
			t.Fatalf("accepted unusable params %+v", p)
		}
		if out := encodeParams(msgHello, p)[1:]; !bytes.Equal(out, b) {
			t.Fatalf("does not re-encode:\n in  %x\n out %x", b, out)
		}
	})
}

// fuzzControl is the shared body of the SYN, SYNACK and REJECT fuzzers:
// decode must fail with ErrProtocol or re-encode to the input.
func fuzzControl[M any](t *testing.T, b []byte, decode func([]byte) (*M, error), encode func(*M) []byte, check func(*M) bool) {
	m, err := decode(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("untyped error %v", err)
		}
		return
	}
	if !check(m) {
		t.Fatalf("accepted %+v", m)
	}
	if out := encode(m)[1:]; !bytes.Equal(out, b) {
		t.Fatalf("does not re-encode:\n in  %x\n out %x", b, out)
	}
}

func validID(id connID) bool { return id.gen <= hdrGenMask }

func FuzzDecodeSyn(f *testing.F) {
	f.Add(encodeSyn(&synMsg{dialer: connID{slot: 1, gen: 2}, rcvbuf: 1 << 20, service: "web"})[1:])
	f.Add(encodeSyn(&synMsg{dialer: connID{slot: 65535, gen: hdrGenMask}, rcvbuf: 1 << 30, service: "7480"})[1:])
	f.Add(encodeSyn(&synMsg{rcvbuf: 0})[1:])
	f.Add([]byte{0, 0, 0, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzControl(t, b, decodeSyn, encodeSyn, func(m *synMsg) bool {
			return validID(m.dialer) && m.rcvbuf > 0 && m.rcvbuf <= 1<<30
		})
	})
}

func FuzzDecodeSynAck(f *testing.F) {
	f.Add(encodeSynAck(&synAckMsg{dialer: connID{1, 2}, acceptor: connID{3, 4}, rcvbuf: 1 << 20, part: 1})[1:])
	f.Add(encodeSynAck(&synAckMsg{dialer: connID{65535, hdrGenMask}, acceptor: connID{0, 0}, rcvbuf: 1 << 30, part: 255})[1:])
	f.Add(encodeSynAck(&synAckMsg{rcvbuf: 1<<30 + 1})[1:])
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzControl(t, b, decodeSynAck, encodeSynAck, func(m *synAckMsg) bool {
			return validID(m.dialer) && validID(m.acceptor) && m.rcvbuf > 0 && m.rcvbuf <= 1<<30
		})
	})
}

func FuzzDecodeReject(f *testing.F) {
	f.Add(encodeReject(&rejectMsg{dialer: connID{1, 2}, code: rejBacklog, reason: "accept queue full"})[1:])
	f.Add(encodeReject(&rejectMsg{dialer: connID{65535, hdrGenMask}, code: rejPolicy, reason: ""})[1:])
	f.Add([]byte{1, 0, 2, 0, 3, 200, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzControl(t, b, decodeReject, encodeReject, func(m *rejectMsg) bool {
			return validID(m.dialer) && len(m.reason) <= maxStringLen
		})
	})
}

func FuzzReadMsg(f *testing.F) {
	var w bytes.Buffer
	writeMsg(&w, encodeSyn(&synMsg{dialer: connID{1, 2}, rcvbuf: 1 << 20, service: "web"}))
	writeMsg(&w, []byte{msgReady})
	f.Add(w.Bytes())
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{1, 16, 0, 0, 3})
	f.Add([]byte{0, 16, 0, 0})
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		buf := make([]byte, maxCtlMsg)
		for used := 0; ; {
			body, err := readMsg(r, buf)
			switch {
			case err == io.EOF:
				if used != len(b) {
					t.Fatalf("io.EOF after %d of %d bytes", used, len(b))
				}
				return
			case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrProtocol):
				return
			case err != nil:
				t.Fatalf("untyped error %v", err)
			}
			if len(body) == 0 || len(body) > maxCtlMsg {
				t.Fatalf("body of %d bytes", len(body))
			}
			var out bytes.Buffer
			if err := writeMsg(&out, body); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), b[used:used+out.Len()]) {
				t.Fatalf("does not re-encode:\n in  %x\n out %x", b[used:used+out.Len()], out.Bytes())
			}
			used += out.Len()
		}
	})
}

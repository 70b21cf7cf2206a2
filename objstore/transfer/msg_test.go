package transfer

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// TestMessagesRoundTrip encodes one message of each type and decodes it.
func TestMessagesRoundTrip(t *testing.T) {
	b := make([]byte, 256)
	id := object.NewID()
	check := func(n int, want msg) {
		t.Helper()
		got, err := decode(b[:n])
		if err != nil {
			t.Fatalf("%s: %v", msgName(want.typ), err)
		}
		if !reflect.DeepEqual(withoutPayload(got), want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	}
	check(encodeTransfer(b, 7, id, Read, 12345), msg{typ: msgTransfer, tid: 7, id: id, mode: Read, threshold: 12345})
	check(encodeData(b, 8, 100, 5, SendRecv), msg{typ: msgData, tid: 8, dataSize: 100, metaSize: 5, proto: SendRecv})
	check(encodeNotFound(b, 9), msg{typ: msgNotFound, tid: 9})
	encodeChunkHeader(b, 10, 4096)
	check(chunkHdrLen+3, msg{typ: msgChunk, tid: 10, off: 4096})
	check(encodeReadInfo(b, 11, 0xdead0000, 0xbeef, 1<<20), msg{typ: msgReadInfo, tid: 11, addr: 0xdead0000, rkey: 0xbeef, length: 1 << 20})
	check(encodeFin(b, 12, finAborted), msg{typ: msgFin, tid: 12, status: finAborted})
	check(encodeAck(b), msg{typ: msgAck})
	encodeChunkHeader(b, 10, 4096)
	if m, err := decode(append(b[:chunkHdrLen:chunkHdrLen], 1, 2, 3)); err != nil || string(m.payload) != "\x01\x02\x03" {
		t.Fatalf("CHUNK payload %q (%v), want 1 2 3", m.payload, err)
	}
}

// FuzzDecodeMessage: decode never panics, accepts only what it can
// re-encode, and rejects with ErrProtocol.
func FuzzDecodeMessage(f *testing.F) {
	b := make([]byte, 64)
	f.Add(b[:encodeTransfer(b, 1, object.ID{1}, Hybrid, 32<<10)])
	f.Add(b[:encodeData(b, 1, 10, 2, Read)])
	f.Add(b[:encodeReadInfo(b, 1, 4096, 9, 100)])
	f.Add(b[:encodeFin(b, 1, finDone)])
	f.Add(b[:encodeAck(b)])
	f.Add([]byte{msgChunk, wireVersion, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'x'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := decode(in)
		if err != nil {
			if !errors.Is(err, object.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		out := make([]byte, len(in)+64)
		var n int
		switch m.typ {
		case msgTransfer:
			n = encodeTransfer(out, m.tid, m.id, m.mode, m.threshold)
		case msgData:
			n = encodeData(out, m.tid, m.dataSize, m.metaSize, m.proto)
		case msgNotFound:
			n = encodeNotFound(out, m.tid)
		case msgChunk:
			encodeChunkHeader(out, m.tid, m.off)
			n = chunkHdrLen + copy(out[chunkHdrLen:], m.payload)
		case msgReadInfo:
			n = encodeReadInfo(out, m.tid, m.addr, m.rkey, m.length)
		case msgFin:
			n = encodeFin(out, m.tid, m.status)
		case msgAck:
			n = encodeAck(out)
			putHeader(out, msgAck, m.tid)
		default:
			t.Fatalf("decoded unknown type %d", m.typ)
		}
		out[2], out[3] = in[2], in[3] // credits
		if n != len(in) {
			t.Fatalf("%s: re-encoded %d bytes from %d", msgName(m.typ), n, len(in))
		}
		for i := range in {
			// TRANSFER's three padding bytes are not checked.
			if m.typ == msgTransfer && i >= headerLen+object.IDSize+1 && i < headerLen+object.IDSize+4 {
				continue
			}
			if in[i] != out[i] {
				t.Fatalf("%s: byte %d is %#x, re-encoded %#x", msgName(m.typ), i, in[i], out[i])
			}
		}
	})
}

// TestProtocolNames: String and ParseProtocol agree; bad names fail.
func TestProtocolNames(t *testing.T) {
	for _, p := range Protocols() {
		got, err := ParseProtocol(p.String())
		if err != nil || got != p {
			t.Fatalf("ParseProtocol(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseProtocol("carrier-pigeon"); err == nil {
		t.Fatal("ParseProtocol accepted a bad name")
	}
	// The hybrid's corrected inequality: total >= threshold → READ.
	for _, c := range []struct {
		mode  Protocol
		total uint64
		want  Protocol
	}{{Hybrid, 99, SendRecv}, {Hybrid, 100, Read}, {Hybrid, 101, Read}, {Hybrid, 0, SendRecv}, {SendRecv, 1 << 30, SendRecv}, {Read, 1, Read}, {Read, 0, SendRecv}} {
		if got := choose(c.mode, 100, c.total); got != c.want {
			t.Errorf("choose(%v, 100, %d) = %v, want %v", c.mode, c.total, got, c.want)
		}
	}
}

func withoutPayload(m msg) msg {
	m.payload = nil
	return m
}

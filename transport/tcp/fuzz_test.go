package tcp

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// FuzzFrameDecoder feeds arbitrary bytes to the frame reader and every
// body decoder: nothing panics, every failure is a typed protocol error
// (or the end of the input), and whatever decodes re-encodes to the same
// bytes.
func FuzzFrameDecoder(f *testing.F) {
	var seeds [][]byte
	seeds = append(seeds, appendHello(nil, &hello{version: Version, address: "tcp://127.0.0.1:1", token: "t"}))
	seeds = append(seeds, appendWelcome(nil, &welcome{version: Version, peerID: 3, address: "tcp://127.0.0.1:2"}))
	seeds = append(seeds, appendReject(nil, rejectToken, "bad auth token"))
	seeds = append(seeds, appendPing(nil, framePing, 42))
	for _, r := range []nic.Request{
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 1, Opcode: verbs.OpRead, RKey: 9, RemoteAddr: 4096, Length: 8},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 2, Opcode: verbs.OpWrite, Length: 3, Payload: [][]byte{[]byte("abc")}},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 3, Opcode: verbs.OpSendWithImm, Imm: 5, Length: 2, Payload: [][]byte{[]byte("h"), []byte("i")}},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 4, Opcode: verbs.OpAtomicCmpAndSwp, Length: 8, Atomic: verbs.AtomicArgs{Compare: [4]uint64{1}, Swap: [4]uint64{2}}},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 5, Opcode: verbs.OpMaskedCmpAndSwp, Length: 32, Atomic: verbs.AtomicArgs{Size: 32, Op: verbs.CmpGreater}},
		{SrcQPN: 1, DstQPN: 2, Seq: 6, Opcode: verbs.OpSend, Datagram: true, QKey: 7, Length: 1, Payload: [][]byte{{9}}},
	} {
		seeds = append(seeds, appendRequest(nil, &r))
	}
	seeds = append(seeds, appendResponse(nil, &nic.Response{Kind: nic.RespAck, SrcQPN: 1, Epoch: 1, Seq: 1, Data: []byte("12345678")}))
	seeds = append(seeds, appendResponse(nil, &nic.Response{Kind: nic.RespRNR, Status: verbs.StatusSuccess, SrcQPN: 1, Epoch: 1, Seq: 2}))
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(bytes.Join(seeds, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), 64, maxFrame)
		var req nic.Request
		var resp nic.Response
		var pbuf [1][]byte
		for {
			typ, body, err := fr.next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("untyped reader error %v", err)
				}
				return
			}
			var re []byte
			switch typ {
			case frameRequest:
				if err = decodeRequest(body, &req, &pbuf); err == nil {
					re = appendRequest(nil, &req)
				}
			case frameResp:
				if err = decodeResponse(body, &resp); err == nil {
					re = appendResponse(nil, &resp)
				}
			case frameHello:
				var h hello
				if h, err = decodeHello(body); err == nil {
					re = appendHello(nil, &h)
				}
			case frameWelcome:
				var w welcome
				if w, err = decodeWelcome(body); err == nil {
					re = appendWelcome(nil, &w)
				}
			case frameReject:
				_, _, err = decodeReject(body)
			}
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("frame type %d: untyped error %v", typ, err)
			}
			if re != nil && !bytes.Equal(re[5:], body) && !reservedBitsOnly(typ, body, re[5:]) {
				t.Fatalf("frame type %d does not re-encode:\n in  %x\n out %x", typ, body, re[5:])
			}
		}
	})
}

// reservedBitsOnly reports whether two encodings differ only in fields
// the decoder ignores (padding of responses and atomics, unused operand
// words are never encoded).
func reservedBitsOnly(typ byte, in, out []byte) bool {
	if len(in) != len(out) {
		return false
	}
	switch typ {
	case frameResp:
		return bytes.Equal(in[:2], out[:2]) && bytes.Equal(in[4:], out[4:])
	case frameRequest:
		if len(in) < reqHeader+8 {
			return false
		}
		return bytes.Equal(in[:reqHeader+2], out[:reqHeader+2]) && bytes.Equal(in[reqHeader+8:], out[reqHeader+8:])
	case frameHello:
		return bytes.Equal(in[:6], out[:6]) && bytes.Equal(in[8:], out[8:])
	}
	return false
}

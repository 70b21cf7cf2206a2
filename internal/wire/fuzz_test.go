package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// FuzzDecode feeds arbitrary bytes to both decoders: nothing panics, every
// failure matches ErrMalformed, and whatever decodes re-encodes to the
// same length with the same header and payload.
func FuzzDecode(f *testing.F) {
	for _, r := range []nic.Request{
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 1, Opcode: verbs.OpRead, RKey: 9, RemoteAddr: 4096, Length: 8},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 2, Opcode: verbs.OpWrite, Length: 3, Payload: [][]byte{[]byte("abc")}},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 4, Opcode: verbs.OpAtomicCmpAndSwp, Length: 8, Atomic: verbs.AtomicArgs{Compare: [4]uint64{1}, Swap: [4]uint64{2}}},
		{SrcQPN: 1, DstQPN: 2, Epoch: 1, Seq: 5, Opcode: verbs.OpMaskedCmpAndSwp, Length: 32, Atomic: verbs.AtomicArgs{Size: 32, Op: verbs.CmpGreater}},
	} {
		f.Add(AppendRequest(nil, &r), true)
	}
	f.Add(AppendResponse(nil, &nic.Response{Kind: nic.RespAck, SrcQPN: 1, Epoch: 1, Seq: 1, Data: []byte("12345678")}), false)
	f.Fuzz(func(t *testing.T, body []byte, isReq bool) {
		if isReq {
			var r nic.Request
			var pbuf [1][]byte
			err := DecodeRequest(body, &r, &pbuf, 1<<20)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			out := AppendRequest(nil, &r)
			if len(out) != len(body) || len(out) != RequestLen(&r) || !bytes.Equal(out[:2], body[:2]) || !bytes.Equal(out[4:RequestHeader], body[4:RequestHeader]) {
				t.Fatalf("request does not re-encode:\n in  %x\n out %x", body, out)
			}
			return
		}
		var r nic.Response
		err := DecodeResponse(body, &r)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		out := AppendResponse(nil, &r)
		if len(out) != len(body) || !bytes.Equal(out[:2], body[:2]) || !bytes.Equal(out[4:], body[4:]) {
			t.Fatalf("response does not re-encode:\n in  %x\n out %x", body, out)
		}
	})
}

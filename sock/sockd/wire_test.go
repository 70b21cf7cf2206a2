package sockd

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

var wireSamples = []msg{
	{typ: msgRegister, id: 7, uri: "shm://web", app: "web", pid: 42, parts: 4, ring: 1 << 20, mtu: 16384},
	{typ: msgAdmit, id: 8, app: "api", parts: 4},
	{typ: msgRelease, app: "api", part: 3, count: 2},
	{typ: msgResolve, id: 9, net: "tcp", addr: "10.0.0.1:80"},
	{typ: msgStatus, id: 10},
	{typ: msgOK, id: 11},
	{typ: msgAdmitted, id: 12, part: 1},
	{typ: msgResolved, id: 13, ok: true, uri: "tcp://10.0.0.1:80"},
	{typ: msgStatusReply, id: 14, body: []byte(`{"listeners":null}`)},
	{typ: msgError, id: 15, code: codeQuota, text: "no"},
}

func TestWireRoundTrip(t *testing.T) {
	var stream []byte
	for _, m := range wireSamples {
		stream = m.encode(stream)
	}
	r := bytes.NewReader(stream)
	for _, want := range wireSamples {
		got, err := readMsg(r, nil, maxFrame)
		if err != nil {
			t.Fatalf("type %d: %v", want.typ, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	}
}

func TestWireRejects(t *testing.T) {
	good := (&msg{typ: msgAdmit, id: 1, app: "a", parts: 2}).encode(nil)[4:]
	for name, tc := range map[string]struct {
		frame []byte
		want  error
	}{
		"version":  {append([]byte{wireVersion + 1}, good[1:]...), ErrVersion},
		"type":     {append([]byte{wireVersion, 99}, good[2:]...), ErrProtocol},
		"short":    {good[:len(good)-1], ErrProtocol},
		"trailing": {append(append([]byte{}, good...), 0), ErrProtocol},
		"header":   {good[:3], ErrProtocol},
		"string":   {append(append([]byte{}, good[:headerLen]...), 200, 'x'), ErrProtocol},
	} {
		if _, err := decode(tc.frame); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	big := (&msg{typ: msgStatusReply, body: make([]byte, maxFrame)}).encode(nil)
	if _, err := readMsg(bytes.NewReader(big), nil, maxFrame); !errors.Is(err, ErrProtocol) {
		t.Errorf("oversized frame: %v, want ErrProtocol", err)
	}
}

// FuzzDecode: no input makes the decoder panic, and what it accepts
// encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range wireSamples {
		f.Add(m.encode(nil)[4:])
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := decode(frame)
		if err != nil {
			return
		}
		again := m.encode(nil)[4:]
		if !bytes.Equal(again, frame) {
			// A RESOLVED's ok byte is any non-1 for false: the only
			// non-canonical encoding.
			if m.typ == msgResolved && !m.ok && len(again) == len(frame) {
				return
			}
			t.Fatalf("decode(%x) = %+v, encodes to %x", frame, m, again)
		}
	})
}

// FuzzReadFrame: a stream of any bytes yields frames no larger than the
// limit and errors, never a panic or an allocation past the limit.
func FuzzReadFrame(f *testing.F) {
	f.Add((&msg{typ: msgStatus, id: 1}).encode(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		buf := make([]byte, 64)
		for {
			frame, err := readFrame(r, buf, maxFrame)
			if err != nil {
				return
			}
			if len(frame) > maxFrame {
				t.Fatalf("frame of %d bytes", len(frame))
			}
			decode(frame)
		}
	})
}

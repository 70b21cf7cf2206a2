package cm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []message{
		{Type: msgREQ, QPN: 1, Transport: "loop", Address: "loop://f/n", PrivateData: []byte("pd")},
		{Type: msgREP, QPN: maxQPN, Transport: strings.Repeat("t", maxTransportLen), Address: strings.Repeat("a", MaxAddressLen), PrivateData: make([]byte, MaxPrivateData)},
		{Type: msgREQ, QPN: 7},
		{Type: msgRTU},
		{Type: msgREJ, Code: codeRejected, Reason: "busy"},
		{Type: msgREJ, Code: codeUnavailable},
	} {
		b, err := appendMessage(nil, &m)
		if err != nil {
			t.Fatalf("%v: %v", m.Type, err)
		}
		got, n, err := decodeMessage(append(b, 0xee))
		if err != nil || n != len(b) {
			t.Fatalf("%v: decode: %v (n %d of %d)", m.Type, err, n, len(b))
		}
		if got.Type != m.Type || got.QPN != m.QPN || got.Transport != m.Transport || got.Address != m.Address ||
			!bytes.Equal(got.PrivateData, m.PrivateData) || got.Code != m.Code || got.Reason != m.Reason {
			t.Fatalf("round trip: %+v → %+v", m, got)
		}
		got2, err := readMessage(bytes.NewReader(b))
		if err != nil || got2.Type != m.Type {
			t.Fatalf("readMessage: %v", err)
		}
		for cut := range len(b) {
			if _, err := readMessage(bytes.NewReader(b[:cut])); err == nil {
				t.Fatalf("%v cut at %d decoded", m.Type, cut)
			}
			if _, _, err := decodeMessage(b[:cut]); !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v cut at %d: %v", m.Type, cut, err)
			}
		}
	}
}

func TestAppendMessageLimits(t *testing.T) {
	for _, m := range []message{
		{Type: msgREQ, QPN: 0},
		{Type: msgREQ, QPN: maxQPN + 1},
		{Type: msgREQ, QPN: 1, Transport: strings.Repeat("t", maxTransportLen+1)},
		{Type: msgREQ, QPN: 1, Address: strings.Repeat("a", MaxAddressLen+1)},
		{Type: msgREP, QPN: 1, PrivateData: make([]byte, MaxPrivateData+1)},
		{Type: msgREJ, Code: 0},
		{Type: msgREJ, Code: maxCode + 1},
		{Type: msgREJ, Code: codeRejected, Reason: strings.Repeat("r", MaxReasonLen+1)},
		{Type: 99},
	} {
		if _, err := appendMessage(nil, &m); err == nil {
			t.Errorf("%+v encoded", m)
		}
	}
}

// A frame announcing a huge payload is refused from its header, before
// anything is allocated or read.
func TestReadMessageChecksLengthFirst(t *testing.T) {
	h := []byte{'R', 'D', 'C', 'M', wireVersion, byte(msgREQ), 0, 0, 0xff, 0xff, 0xff, 0xff}
	r := &countingReader{r: io.MultiReader(bytes.NewReader(h), infinite{})}
	if _, err := readMessage(r); !errors.Is(err, ErrProtocol) {
		t.Fatalf("got %v", err)
	}
	if r.n != headerLen {
		t.Fatalf("read %d bytes, want only the %d-byte header", r.n, headerLen)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

type infinite struct{}

func (infinite) Read(p []byte) (int, error) { return len(p), nil }

func TestTruncateReason(t *testing.T) {
	s := truncateReason(strings.Repeat("é", MaxReasonLen))
	if len(s) > MaxReasonLen || !utf8.ValidString(s) {
		t.Fatalf("len %d, valid %v", len(s), utf8.ValidString(s))
	}
	if truncateReason("short") != "short" {
		t.Fatal("short reason changed")
	}
}

// FuzzDecodeMessage: the exchange decoder never panics, refuses with
// ErrProtocol, never reads past the frame, and what it accepts re-encodes
// to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range []message{
		{Type: msgREQ, QPN: 3, Transport: "loop", Address: "loop://f/client", PrivateData: EncodeDescs([]MRDesc{{1, 2, 3}})},
		{Type: msgREP, QPN: 0xffffff, Transport: "tcp", Address: "tcp://10.0.0.1:7000"},
		{Type: msgRTU},
		{Type: msgREJ, Code: codeProtocol, Reason: "bad magic"},
	} {
		b, err := appendMessage(nil, &m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := decodeMessage(b)
		r, rerr := readMessage(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error does not wrap ErrProtocol: %v", err)
			}
			if rerr == nil {
				t.Fatalf("readMessage accepted what decodeMessage refused: %v", err)
			}
			return
		}
		if rerr != nil || r.Type != m.Type {
			t.Fatalf("readMessage disagrees: %v", rerr)
		}
		if n < headerLen || n > len(b) || n > headerLen+maxPayload {
			t.Fatalf("frame length %d of %d", n, len(b))
		}
		if len(m.PrivateData) > MaxPrivateData || len(m.Address) > MaxAddressLen || len(m.Reason) > MaxReasonLen {
			t.Fatalf("limits exceeded: %+v", m)
		}
		enc, err := appendMessage(nil, &m)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", enc, b[:n])
		}
		_ = m.err()
	})
}

package memnode

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzHello: any private data a dialer sends parses without a panic, and
// a Hello a client marshals comes back as itself.
func FuzzHello(f *testing.F) {
	f.Add([]byte("s3cret"), true)
	f.Add([]byte("prism-kv\x00s3cret"), true)
	f.Add([]byte{0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, b []byte, named bool) {
		_ = parseHello(b, named)
		h := Hello{Service: string(b), Token: "tok"}
		if strings.IndexByte(h.Service, 0) >= 0 || h.Service == "" {
			return
		}
		if got := parseHello(h.Marshal(), true); got != h {
			t.Fatalf("parseHello(Marshal(%+v)) = %+v", h, got)
		}
	})
}

// FuzzReadInfo: a node's output, whatever it holds, gives an Info or an
// error, never a panic or a read past the announcement.
func FuzzReadInfo(f *testing.F) {
	f.Add([]byte("rdmakit node\n{\"device\":\"tcp://127.0.0.1:1\",\"regions\":[{\"addr\":1,\"len\":8,\"rkey\":2}]}\nafter\n"))
	f.Add([]byte("{not json\n"))
	f.Add([]byte("no newline"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		if _, err := ReadInfo(r, nil); err == nil {
			// It stops at the announcement's newline (or the end).
			rest := b[len(b)-r.Len():]
			if i := bytes.IndexByte(b, '{'); i < 0 || (len(rest) > 0 && b[len(b)-r.Len()-1] != '\n') {
				t.Fatalf("an Info from %q, rest %q", b, rest)
			}
		}
	})
}

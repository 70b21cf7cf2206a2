package perf

import (
	"testing"

	_ "github.com/rdmakit/rdmakit/transport/loop"
)

// The payloads a measurement copies from are written, so no page of them
// is the kernel's zero page (see fill).
func TestPayloadsAreFilled(t *testing.T) {
	p, err := Open(Config{Client: "loop://perffill/client", Server: "loop://perffill/server", MaxSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for name, b := range map[string][]byte{"client": p.cmr.Bytes()[:p.cfg.MaxSize], "server": p.srv.mr.Bytes()[:p.cfg.MaxSize]} {
		for off := 0; off < len(b); off += 4096 {
			page := b[off:min(off+4096, len(b))]
			zero := true
			for _, c := range page {
				if c != 0 {
					zero = false
					break
				}
			}
			if zero {
				t.Errorf("%s payload: the page at %d is all zeros", name, off)
				break
			}
		}
	}
}

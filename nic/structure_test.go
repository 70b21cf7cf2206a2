package nic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneResponder keeps the engine one engine: the opcode switch that
// executes requests lives in the responder only (responder.go, and the
// atomics unit it calls). A requester that needs to tell requests apart
// asks shapeOf (sgl.go) instead of switching on opcodes again.
func TestOneResponder(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"responder.go": true, "responder_atomic.go": true}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || allowed[f] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "case verbs.Op") {
				t.Errorf("%s:%d: an opcode switch outside the responder: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

package bench

import (
	"strings"
	"testing"
)

// TestTail keeps the last TailMax bytes and joins lines.
func TestTail(t *testing.T) {
	var tl Tail
	tl.Write([]byte("first\nsecond\n"))
	if got := tl.String(); got != "first | second" {
		t.Fatalf("String = %q", got)
	}
	tl.Write([]byte(strings.Repeat("x", TailMax)))
	if got := tl.String(); len(got) != TailMax || strings.Contains(got, "first") {
		t.Fatalf("after %d more bytes kept %d, with the start: %v", TailMax, len(got), strings.Contains(got, "first"))
	}
}

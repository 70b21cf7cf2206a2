package bench

import (
	"strings"
	"sync"
)

// TailMax is how many bytes a Tail keeps.
const TailMax = 4 << 10

// Tail keeps the last TailMax bytes written to it: a child process's
// stderr (a server or store an experiment started), for its error
// messages. It is safe for concurrent use.
type Tail struct {
	mu sync.Mutex
	b  []byte
}

// Write implements io.Writer.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - TailMax; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns what was kept, its lines joined by " | ".
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Split(strings.TrimSpace(string(t.b)), "\n"), " | ")
}

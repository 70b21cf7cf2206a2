package remotedev

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// Captured is a child playing a role of the test's own whose stdout and
// stderr are kept, for the message of a test that fails.
type Captured struct {
	// Cmd is the child's command, started.
	Cmd *exec.Cmd
	out LockedBuffer
}

// StartCaptured starts the test binary as a child playing role with arg,
// files as its descriptors 3, 4, …. The test's cleanup kills it if it
// still runs.
func StartCaptured(t testing.TB, role, arg string, files ...*os.File) *Captured {
	t.Helper()
	cmd, err := Command(role, arg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Captured{Cmd: cmd}
	cmd.ExtraFiles = files
	cmd.Stdout = &c.out
	cmd.Stderr = &c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child %s: %v", role, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// Output is what the child wrote so far.
func (c *Captured) Output() string { return c.out.String() }

// LockedBuffer is a bytes.Buffer that one goroutine may write while
// another reads it: a child's or an in-process command's captured
// output. The zero LockedBuffer is ready.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

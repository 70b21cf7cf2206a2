package peers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNotInstalled is wrapped by the error returned when a peer's binary is
// not on PATH. Test with errors.Is; the message says how to install it.
var ErrNotInstalled = errors.New("peer not installed")

// InstallHint is the command that installs every peer.
const InstallHint = "sudo scripts/install-peers.sh"

// Bounds of the process handling.
const (
	// listenTimeout bounds the wait for a server to listen.
	listenTimeout = 5 * time.Second
	// listenPoll is the interval between checks that a server listens.
	listenPoll = 5 * time.Millisecond
	// waitDelay bounds the wait for a killed child's output pipes.
	waitDelay = time.Second
	// startAttempts is how often a server is started on a fresh port
	// before giving up (another process may take the port first).
	startAttempts = 3
)

// lookPath finds a peer's binary, or returns an error wrapping
// ErrNotInstalled naming the install-peers.sh argument that installs it.
func lookPath(bin, peer string) (string, error) {
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found on PATH (install it with %s %s)", ErrNotInstalled, bin, InstallHint, peer)
	}
	return p, nil
}

// syncBuffer is a bytes.Buffer safe for a child's writes and our reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// proc is a child process running in the background.
type proc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    *syncBuffer // stdout and stderr, interleaved
	done   chan struct{}
	err    error // Wait's result, set before done is closed
}

// command builds a child process bound to ctx: killed when ctx ends,
// with stdout and stderr into out, env added to ours.
func command(ctx context.Context, bin string, args, env []string, out *syncBuffer) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = waitDelay
	cmd.SysProcAttr = sysProcAttr()
	return cmd
}

// startProc starts bin in the background; stop kills it. Each adjust
// changes the command before it starts (its user, directory or how it is
// cancelled).
func startProc(ctx context.Context, bin string, args, env []string, adjust ...func(*exec.Cmd)) (*proc, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &proc{cancel: cancel, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = command(ctx, bin, args, env, p.out)
	for _, a := range adjust {
		a(p.cmd)
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to end by itself, reporting whether
// it did.
func (p *proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// stop kills the process if it still runs and waits for it.
func (p *proc) stop() {
	p.cancel()
	<-p.done
}

// runClient runs bin to completion within ctx and returns its combined
// output and Wait's error.
func runClient(ctx context.Context, bin string, args, env []string) ([]byte, error) {
	out := &syncBuffer{}
	err := command(ctx, bin, args, env, out).Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return out.Bytes(), err
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts a server on a fresh port, args(port) giving its
// arguments, and waits until it listens. It retries on a fresh port when
// the server exits before listening (the port was taken meanwhile).
func startServer(ctx context.Context, bin string, args func(port int) []string, env []string) (*proc, int, error) {
	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, 0, fmt.Errorf("free port: %w", err)
		}
		p, err := startProc(ctx, bin, args(port), env)
		if err != nil {
			return nil, 0, err
		}
		err = waitListening(ctx, p, port)
		if err == nil {
			return p, port, nil
		}
		p.stop()
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, 0, lastErr
}

// waitListening polls the kernel's TCP tables until some socket listens
// on port, failing when the process exits or listenTimeout passes. It
// does not connect: ucx_perftest's server accepts a single connection.
func waitListening(ctx context.Context, p *proc, port int) error {
	deadline := time.Now().Add(listenTimeout)
	for {
		ok, err := listening(port)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("server exited before listening on port %d: %v: %s", port, p.err, tail(p.out.Bytes(), 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not listening on port %d after %v", port, listenTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(listenPoll):
		}
	}
}

// listening reports whether a TCP socket is in LISTEN state on port,
// from /proc/net/tcp and /proc/net/tcp6.
func listening(port int) (bool, error) {
	found := false
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		found = true
		if listensOn(data, port) {
			return true, nil
		}
	}
	if !found {
		return false, errors.New("cannot tell whether the server listens: no /proc/net/tcp")
	}
	return false, nil
}

// tcpListen is the LISTEN state in /proc/net/tcp.
const tcpListen = "0A"

// listensOn reports whether a /proc/net/tcp table has a socket listening
// on port (any address).
func listensOn(table []byte, port int) bool {
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
			return true
		}
	}
	return false
}

// tail returns the last n non-empty lines of out, joined by " | ", for
// error messages.
func tail(out []byte, n int) string {
	var lines []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if l = strings.TrimSpace(stripANSI(l)); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "(no output)"
	}
	return strings.Join(lines, " | ")
}

// stripANSI removes ANSI escape sequences (ESC [ … final byte), which
// sockperf prints around its headline figures.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '[' {
			i += 2
			for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
				i++
			}
		}
	}
	return b.String()
}

// childEnv returns our environment without variables starting with any
// of drop, plus add.
func childEnv(drop []string, add ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, d := range drop {
			if strings.HasPrefix(kv, d) {
				keep = false
				break
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return append(env, add...)
}

// usec converts a figure printed in microseconds to a Duration, rounded
// to the nanosecond. It rejects negative, non-finite and absurd values.
func usec(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if f != f || f < 0 || f > maxUsec {
		return 0, fmt.Errorf("latency %q out of range", s)
	}
	return time.Duration(f*1e3 + 0.5), nil
}

// maxUsec is the largest latency accepted, in µs: one hour.
const maxUsec = 3600e6

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoCommand is returned when an experiment must start rdmakit's own
// servers (`rdmakit kv serve`) and Options.Command is not set.
var ErrNoCommand = errors.New("bench: no way to run the rdmakit command (Options.Command); run the experiment through the rdmakit command")

// Server is an rdmakit server in its own process, started the way a
// user starts one (`rdmakit kv serve`, `rdmakit rs replica`), with a
// random token in its environment.
type Server struct {
	// Addr is its connection manager's address, Device its verbs
	// device, as it announced them; Token is what its clients present.
	Addr, Device, Token string

	cmd    *exec.Cmd
	done   chan struct{} // closed when it has exited
	stderr *tailBuffer
}

// kvServeStartup bounds how long a server takes to say where it serves.
const kvServeStartup = 30 * time.Second

// serveLine is how a server says where it serves.
var serveLine = regexp.MustCompile(`connect to (\S+) \(verbs device (\S+)\)`)

// startKVServe runs `rdmakit kv serve` for design on device (its
// connection manager on a free loopback port), sized for keys values of
// value bytes, and waits until it serves.
func startKVServe(ctx context.Context, env *Env, design, device string, keys int64, value int) (*Server, error) {
	return StartServer(ctx, env, "", "--log-level", "info", // its clients' departures, in Dump's tail
		"kv", "serve", "--store", design, "--device", device, "--listen", "127.0.0.1:0",
		"--metrics", "", // nodes run side by side: not all on the default port
		"--keys", strconv.FormatInt(keys, 10), "--value", strconv.Itoa(value))
}

// StartServer runs the rdmakit command with args (a server command that
// announces "connect to ADDR (verbs device URI)", listening on
// 127.0.0.1:0) through env.Command, with token in $RDMAKIT_TOKEN (a
// fresh random one when token is empty), and waits until it serves. It
// is killed when ctx ends; Stop ends it before. ErrNoCommand when env
// has no Command.
func StartServer(ctx context.Context, env *Env, token string, args ...string) (*Server, error) {
	if env.Command == nil {
		return nil, ErrNoCommand
	}
	if token == "" {
		var err error
		if token, err = NewToken(); err != nil {
			return nil, err
		}
	}
	n := &Server{Token: token, done: make(chan struct{}), stderr: &tailBuffer{max: 256 << 10}}
	n.cmd = env.Command(ctx, args...)
	if n.cmd.Env == nil {
		n.cmd.Env = os.Environ()
	}
	// The token travels in the environment: unlike arguments, other
	// users cannot read it in /proc.
	n.cmd.Env = append(n.cmd.Env, "RDMAKIT_TOKEN="+n.Token)
	n.cmd.Stderr = n.stderr
	n.cmd.SysProcAttr = childAttr()
	n.cmd.WaitDelay = time.Second
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", strings.Join(args, " "), err)
	}
	go func() {
		n.cmd.Wait()
		close(n.done)
	}()
	announced := make(chan []string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		announced <- serveLine.FindStringSubmatch(line)
		r.WriteTo(devNull{}) // the rest of its output
	}()
	t := time.NewTimer(kvServeStartup)
	defer t.Stop()
	select {
	case m := <-announced:
		if m != nil {
			n.Addr, n.Device = m[1], m[2]
			return n, nil
		}
		err = errors.New("it did not say where it serves")
	case <-t.C:
		err = fmt.Errorf("it did not serve within %v", kvServeStartup)
	case <-ctx.Done():
		err = ctx.Err()
	}
	n.Stop()
	return nil, fmt.Errorf("bench: %s: %w: %s", strings.Join(args, " "), err, n.stderr.tail())
}

// NewToken returns a random auth token.
func NewToken() (string, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return "", err
	}
	return hex.EncodeToString(tok), nil
}

// Pid is the server's process id.
func (n *Server) Pid() int { return n.cmd.Process.Pid }

// Stop ends the server with SIGINT (its graceful shutdown), then kills
// it, and waits for it.
func (n *Server) Stop() { n.end(os.Interrupt) }

// Dump has the server write its waiting QPs' state (SIGUSR1), then ends
// it with SIGQUIT, so that the Go runtime writes every
// goroutine's stack to its stderr, and returns the last of what it
// wrote (up to 256 KiB): for the report of a server found stuck.
func (n *Server) Dump() string {
	n.cmd.Process.Signal(syscall.SIGUSR1) // its QPs' state first (rdmakit's handler)
	time.Sleep(200 * time.Millisecond)
	n.end(syscall.SIGQUIT)
	n.stderr.mu.Lock()
	defer n.stderr.mu.Unlock()
	return string(n.stderr.b)
}

// end signals the server with sig, kills it if it has not exited 5 s
// later, and waits for it.
func (n *Server) end(sig os.Signal) {
	n.cmd.Process.Signal(sig)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-n.done:
	case <-t.C:
		n.cmd.Process.Kill()
		<-n.done
	}
}

// tailBuffer keeps the last max bytes written to it (a child's stderr,
// for error messages).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// tail returns the last lines written, joined by " | ".
func (t *tailBuffer) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(string(bytes.TrimSpace(t.b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// devNull discards what is written to it.
type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// ProcCPU returns the user+system CPU time process pid has used so far,
// all its threads, from /proc/PID/stat (10 ms ticks): what experiments
// report as a server's CPU per operation.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

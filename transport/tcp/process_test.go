package tcp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// nodeEnv, when set, makes the test binary a node: it serves devices over
// a remotedev control connection on the Unix socket it names.
const nodeEnv = "RDMAKIT_TCP_TEST_NODE"

// startTimeout bounds the start of a node process.
const startTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	if path := os.Getenv(nodeEnv); path != "" {
		os.Exit(runNode(path))
	}
	code := m.Run()
	sharedNode.stop()
	os.Exit(code)
}

// runNode is the main of a node process: it listens on path, says "ready"
// on stdout, serves the first control connection and exits when that
// connection closes, on SIGTERM, or when no connection comes within
// startTimeout (the parent died while starting it).
func runNode(path string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ul, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	l := &watchedListener{Listener: ul, accepted: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.accepted:
		case <-time.After(startTimeout):
			cancel()
		}
	}()
	fmt.Println("ready")
	if err := remotedev.Serve(ctx, l, remotedev.SingleConn(), remotedev.WithCrash(tcp.Crash)); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	return 0
}

// watchedListener closes accepted at its first successful Accept.
type watchedListener struct {
	net.Listener
	once     sync.Once
	accepted chan struct{}
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.once.Do(func() { close(l.accepted) })
	}
	return c, err
}

// node is a node process and the client controlling it.
type node struct {
	cmd    *exec.Cmd
	client *remotedev.Client
	dir    string
	exited chan struct{}
	err    error // cmd.Wait's result, once exited is closed
}

// startNode re-executes the test binary as a node process.
func startNode() (_ *node, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rdmakit-node-")
	if err != nil {
		return nil, err
	}
	n := &node{dir: dir, exited: make(chan struct{})}
	path := filepath.Join(dir, "ctl.sock")
	n.cmd = exec.Command(exe)
	n.cmd.Env = append(os.Environ(), nodeEnv+"="+path)
	n.cmd.Stderr = os.Stderr
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	defer func() {
		if err != nil {
			n.kill()
		}
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("node said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return nil, fmt.Errorf("node process did not start: %w", err)
		}
	case <-timer.C:
		return nil, fmt.Errorf("node process not ready after %v", startTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if n.client, err = remotedev.Dial(ctx, path); err != nil {
		return nil, err
	}
	return n, nil
}

// kill ends the process with SIGKILL and waits for it.
func (n *node) kill() {
	n.cmd.Process.Kill()
	<-n.exited
	if n.client != nil {
		n.client.Close()
	}
	os.RemoveAll(n.dir)
}

// stop closes the control connection, which makes the node exit; a node
// that does not exit in time is killed.
func (n *node) stop() error {
	n.client.Close()
	select {
	case <-n.exited:
	case <-time.After(startTimeout):
		n.kill()
		return fmt.Errorf("node process did not exit after its connection closed")
	}
	os.RemoveAll(n.dir)
	return n.err
}

// shared is the node process of the cross-process conformance run, started
// on first use and stopped by TestMain.
type shared struct {
	once sync.Once
	n    *node
	err  error
}

var sharedNode shared

func (s *shared) get(t testing.TB) *node {
	t.Helper()
	s.once.Do(func() { s.n, s.err = startNode() })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.n
}

func (s *shared) stop() {
	if s.n != nil {
		if err := s.n.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "node process:", err)
		}
	}
}

// crossProcess opens device 0 in this process and devices 1…n-1 in a node
// process, driven through remotedev proxies: their soft NICs, listeners
// and links live in the other process, and their memory regions are shared
// memfds.
type crossProcess struct {
	node func(t testing.TB) *node
}

func (crossProcess) Name() string { return "tcp (cross-process)" }

func (p crossProcess) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	devs := make([]verbs.Device, n)
	for i := range devs {
		var d verbs.Device
		var err error
		if i == 0 {
			d, err = verbs.Open("tcp://127.0.0.1:0")
		} else {
			d, err = p.node(t).client.Open("tcp://127.0.0.1:0?memfd=1")
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	return devs
}

var _ verbstest.Killer = crossProcess{}

// Kill implements verbstest.Killer: tcp.Crash, run in the device's
// process.
func (crossProcess) Kill(t testing.TB, d verbs.Device) {
	crash := tcp.Crash
	if remotedev.IsProxy(d) {
		crash = remotedev.Crash
	}
	if err := crash(d); err != nil {
		t.Fatal(err)
	}
}

func TestConformanceCrossProcess(t *testing.T) {
	verbstest.Run(t, crossProcess{node: sharedNode.get})
}

// TestNodeProcessKilled kills a node process with SIGKILL while this
// process has READs and SENDs outstanding to it: the first completes with
// RETRY_EXC_ERR once the link's connection breaks, the rest with
// RETRY_EXC_ERR or WR_FLUSH_ERR, and the QP moves to ERROR.
func TestNodeProcessKilled(t *testing.T) {
	n, err := startNode()
	if err != nil {
		t.Fatal(err)
	}
	defer n.kill()
	devs := crossProcess{node: func(testing.TB) *node { return n }}.Open(t, 2)
	a, b := devs[0], devs[1]
	pa, err := a.AllocPD()
	mustOK(t, err)
	pb, err := b.AllocPD()
	mustOK(t, err)
	cqa, err := a.CreateCQ(1024)
	mustOK(t, err)
	cqb, err := b.CreateCQ(1024)
	mustOK(t, err)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	mustOK(t, err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	mustOK(t, err)
	ma, err := pa.AllocMR(1<<16, verbs.AccessAll)
	mustOK(t, err)
	mb, err := pb.AllocMR(1<<16, verbs.AccessAll)
	mustOK(t, err)
	// qa's retry budget (a minute) is far beyond the test's bound: only
	// the broken connection can fail its requests in time. Its SENDs retry
	// forever for a receive that is never posted, so everything behind the
	// first SEND stays outstanding.
	mustOK(t, qa.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}))
	mustOK(t, qa.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: b.Address(), DestQPN: qb.QPN(), MinRNRTimer: time.Millisecond}))
	mustOK(t, qa.Modify(verbs.QPAttr{State: verbs.StateRTS, RNRRetry: verbs.InfiniteRNRRetry, Timeout: 7 * time.Second, RetryCount: 7}))
	mustOK(t, verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))

	// The memory is shared: a WRITE from this process lands in the node's
	// region and shows in the mapping here.
	copy(ma.Bytes(), "shared")
	mustOK(t, qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: ma.Addr(), Length: 6, LKey: ma.LKey()}}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}}))
	if wc := pollFor(t, cqa, 1, verbstest.WaitTimeout)[0]; wc.ID != 1 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("WRITE: %+v", wc)
	}
	if string(mb.Bytes()[:6]) != "shared" {
		t.Fatalf("node region holds %q after the WRITE", mb.Bytes()[:6])
	}

	const outstanding = 200
	var wrs []verbs.SendWR
	for i := range outstanding {
		id := uint64(100 + i)
		if i%2 == 0 {
			wrs = append(wrs, verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: ma.Addr(), Length: 64, LKey: ma.LKey()}}})
		} else {
			wrs = append(wrs, verbs.SendWR{ID: id, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: ma.Addr() + uint64(64*i), Length: 64, LKey: ma.LKey()}}, RemoteAddr: mb.Addr(), RKey: mb.RKey()})
		}
	}
	mustOK(t, qa.PostSend(wrs))
	// Nothing completes while the first SEND waits for a receive.
	if wcs := pollFor(t, cqa, 1, verbstest.QuietPeriod); len(wcs) != 0 {
		t.Fatalf("completion before the kill: %+v", wcs)
	}

	killed := time.Now()
	n.cmd.Process.Kill()
	const bound = 5 * time.Second
	wcs := pollFor(t, cqa, outstanding, bound)
	if len(wcs) != outstanding {
		t.Fatalf("%d of %d outstanding requests completed within %v of the kill", len(wcs), outstanding, bound)
	}
	for i, wc := range wcs {
		if wc.ID != uint64(100+i) {
			t.Fatalf("completion %d has wr_id %d, want %d", i, wc.ID, 100+i)
		}
		if i == 0 && wc.Status != verbs.StatusRetryExcErr {
			t.Fatalf("first outstanding request: %v, want RETRY_EXC_ERR", wc.Status)
		}
		if wc.Status != verbs.StatusRetryExcErr && wc.Status != verbs.StatusWRFlushErr {
			t.Fatalf("outstanding request %d: %v, want RETRY_EXC_ERR or WR_FLUSH_ERR", wc.ID, wc.Status)
		}
	}
	t.Logf("%d outstanding requests failed %v after the kill", outstanding, time.Since(killed).Round(time.Millisecond))
	if s := qa.State(); s != verbs.StateError {
		t.Fatalf("QP in %v after its peer died, want ERROR", s)
	}
	mustOK(t, qa.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: ma.Addr(), Length: 8, LKey: ma.LKey()}}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}}))
	if wc := pollFor(t, cqa, 1, verbstest.WaitTimeout); len(wc) != 1 || wc[0].ID != 7 || wc[0].Status != verbs.StatusWRFlushErr {
		t.Fatalf("request after the failure: %+v, want WR_FLUSH_ERR", wc)
	}

	// The proxies report the dead process instead of hanging, and the
	// region's memory outlives it.
	select {
	case <-n.client.Done():
	case <-time.After(bound):
		t.Fatal("control connection not closed after the kill")
	}
	if _, err := cqb.Poll(make([]verbs.WC, 4)); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Poll of a dead node's CQ: %v, want ErrClosed", err)
	}
	if err := qb.PostRecv([]verbs.RecvWR{{ID: 1}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("PostRecv on a dead node: %v, want ErrClosed", err)
	}
	if string(mb.Bytes()[:6]) != "shared" {
		t.Fatalf("region of the dead node holds %q", mb.Bytes()[:6])
	}
	<-n.exited
	if ws, ok := n.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("node process ended with %v, want SIGKILL", n.cmd.ProcessState)
	}
}

// mustOK fails the test on error.
func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pollFor polls cq until it has n completions or d passes.
func pollFor(t testing.TB, cq verbs.CQ, n int, d time.Duration) []verbs.WC {
	t.Helper()
	var out []verbs.WC
	buf := make([]verbs.WC, 64)
	deadline := time.Now().Add(d)
	for len(out) < n && time.Now().Before(deadline) {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return out
}

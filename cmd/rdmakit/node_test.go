package main

import (
	"context"
	"errors"
	"github.com/rdmakit/rdmakit/internal/remotedev"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestMain lets a test re-execute the test binary as the rdmakit command.
func TestMain(m *testing.M) {
	if os.Getenv("RDMAKIT_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// lockedBuffer is the captured output of a command run in this process.
type lockedBuffer = remotedev.LockedBuffer

// runningNode is an rdmakit node started in this process.
type runningNode struct {
	info   memnode.Info
	stdout *lockedBuffer
	stderr *lockedBuffer
	cancel context.CancelFunc
	code   chan int
}

// readAnnouncement copies r to out and returns the node's Info.
func readAnnouncement(t *testing.T, r io.Reader, out io.Writer) memnode.Info {
	t.Helper()
	type result struct {
		info memnode.Info
		err  error
	}
	res := make(chan result, 1)
	go func() {
		info, err := memnode.ReadInfo(r, out)
		res <- result{info, err}
		io.Copy(out, r)
	}()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.info
	case <-time.After(5 * time.Second):
		t.Fatal("no announcement from the node")
	}
	return memnode.Info{}
}

// startNode runs rdmakit node with args on free ports.
func startNode(t *testing.T, args ...string) *runningNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	n := &runningNode{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, cancel: cancel, code: make(chan int, 1)}
	args = append([]string{"node", "--uri", "tcp://127.0.0.1:0", "--cm", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
		"--mem", "1MiB", "--log-level", "info"}, args...)
	go func() {
		code := run(ctx, args, pw, n.stderr)
		pw.Close()
		n.code <- code
	}()
	n.info = readAnnouncement(t, pr, n.stdout)
	t.Cleanup(func() {
		cancel()
		select {
		case <-n.code:
		case <-time.After(5 * time.Second):
		}
	})
	return n
}

// stop cancels the node's context and returns its exit code.
func (n *runningNode) stop(t *testing.T) int {
	t.Helper()
	n.cancel()
	select {
	case code := <-n.code:
		n.code <- code
		return code
	case <-time.After(5 * time.Second):
		t.Fatal("the node did not stop")
	}
	return -1
}

var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// scrape returns the node's metrics as name{labels} → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", url, resp.Status, err)
	}
	m := map[string]float64{}
	for l := range strings.SplitSeq(string(body), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		m[l[:i]] = v
	}
	return m
}

// client is a cm.Dial client of a node.
type client struct {
	dev   verbs.Device
	cq    verbs.CQ
	conn  *cm.Conn
	mr    verbs.MR
	descs []cm.MRDesc
}

func dialNode(t *testing.T, cmAddr string, private []byte) *client {
	t.Helper()
	c := &client{}
	var err error
	if c.dev, err = verbs.Open("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.dev.Close() })
	pd, err := c.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if c.cq, err = c.dev.CreateCQ(64); err != nil {
		t.Fatal(err)
	}
	if c.mr, err = pd.AllocMR(4096, verbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.conn, err = cm.Dial(ctx, c.dev, cmAddr, cm.Options{PD: pd, SendCQ: c.cq, RecvCQ: c.cq, PrivateData: private}); err != nil {
		t.Fatal(err)
	}
	if c.descs, err = cm.DecodeDescs(c.conn.PeerPrivateData()); err != nil {
		t.Fatal(err)
	}
	return c
}

// do posts one signaled request of n bytes at offset 0 of the local
// buffer and of region r, and waits for its completion.
func (c *client) do(t *testing.T, op verbs.Opcode, r int, n uint32) {
	t.Helper()
	wr := verbs.SendWR{ID: 7, Opcode: op, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: c.mr.Addr(), Length: n, LKey: c.mr.LKey()}},
		RemoteAddr: c.descs[r].Addr, RKey: c.descs[r].RKey}
	if err := c.conn.QP().PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctx, c.cq, wc, verbs.PollAdaptive); err != nil {
		t.Fatal(err)
	}
	if wc[0].Status != verbs.StatusSuccess {
		t.Fatalf("%v: %v", op, wc[0].Status)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNodeMetricsAndShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	n := startNode(t, "--mrs", "2", "--probe", "100ms")
	out := n.stdout.String()
	mustContain(t, out, "rdmakit node", "  device   tcp://127.0.0.1:", "  cm       127.0.0.1:", "  metrics  http://127.0.0.1:",
		"  memory   1 MiB in 2 regions, access read,write,atomic", "  region 0 addr=0x", "  region 1 addr=0x")
	if len(n.info.Regions) != 2 || n.info.Regions[0].Len != 512<<10 || n.info.Access != "read,write,atomic" || n.info.Recv != 256 {
		t.Fatalf("announcement %+v", n.info)
	}

	m := scrape(t, n.info.Metrics)
	for _, name := range []string{`rdmakit_ops_total{opcode="RDMA_READ"}`, `rdmakit_ops_total{opcode="RDMA_WRITE"}`,
		"rdmakit_bytes_total", "rdmakit_errors_total", "rdmakit_rnr_total", "rdmakit_outstanding_requests",
		"rdmakit_connected_qps", "rdmakit_peers", "rdmakit_refused_connections_total", "rdmakit_node_connections",
		"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := m[name]; !ok {
			t.Errorf("no metric %s", name)
		}
	}
	if m[`rdmakit_ops_total{opcode="RDMA_READ"}`] != 0 || m["rdmakit_node_memory_bytes"] != 1<<20 {
		t.Errorf("fresh node: %v", m)
	}

	c := dialNode(t, n.info.CM, nil)
	if len(c.descs) != 2 {
		t.Fatalf("descriptors %v", c.descs)
	}
	copy(c.mr.Bytes(), "rdmakit!")
	c.do(t, verbs.OpWrite, 1, 8)
	clear(c.mr.Bytes())
	for range 3 {
		c.do(t, verbs.OpRead, 1, 8)
	}
	if got := string(c.mr.Bytes()[:8]); got != "rdmakit!" {
		t.Errorf("read back %q", got)
	}
	c.do(t, verbs.OpAtomicFetchAndAdd, 0, 8)

	// The client's Dial returns when it sends its confirmation; the node
	// counts the connection once that confirmation arrives.
	waitFor(t, "the node to count the connection", func() bool {
		return scrape(t, n.info.Metrics)["rdmakit_node_accepted_total"] == 1
	})
	m = scrape(t, n.info.Metrics)
	for name, want := range map[string]float64{`rdmakit_ops_total{opcode="RDMA_READ"}`: 3, `rdmakit_ops_total{opcode="RDMA_WRITE"}`: 1,
		`rdmakit_ops_total{opcode="ATOMIC_FETCH_AND_ADD"}`: 1, "rdmakit_bytes_total": 40, "rdmakit_connected_qps": 1,
		"rdmakit_peers": 1, "rdmakit_node_connections": 1, "rdmakit_node_accepted_total": 1, "rdmakit_errors_total": 0} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}

	// A gone client's connection is found by the probe and freed.
	c.conn.Close()
	c.dev.Close()
	waitFor(t, "the connection to be freed", func() bool {
		m := scrape(t, n.info.Metrics)
		return m["rdmakit_node_connections"] == 0 && m["rdmakit_connected_qps"] == 0
	})

	if code := n.stop(t); code != 0 {
		t.Fatalf("exit %d: %s", code, n.stderr.String())
	}
	mustContain(t, n.stdout.String(), "rdmakit node: stopped after 1 connections")
	mustContain(t, n.stderr.String(), "connection established", "the peer is gone", "node shutting down")
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	if _, err := httpClient.Get(n.info.Metrics); err == nil {
		t.Error("metrics still served after shutdown")
	}
}

// tableRows counts the data rows of a perftest table headed by title.
func tableRows(out, title string) int {
	i := strings.Index(out, title)
	if i < 0 {
		return 0
	}
	block := out[i:]
	if j := strings.Index(block[1:], "\n\n"); j >= 0 {
		block = block[:j+1]
	}
	return len(regexp.MustCompile(`(?m)^ \d+ +\d+ `).FindAllString(block, -1))
}

func TestPerfConnect(t *testing.T) {
	n := startNode(t, "--echo", "--token", "s3cret", "--recv", "64")
	out, errs, code := execute(t, "perf", "--connect", n.info.CM, "--token", "s3cret", "--iters", "50", "--sizes", "8-64", "--window", "16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "RDMA_Read Latency Test", "RDMA_Read BW Test", "RDMA_Write Latency Test", "RDMA_Write BW Test",
		"Atomic CMP_AND_SWAP Latency Test", "Atomic FETCH_AND_ADD BW Test", " Transport      : tcp",
		" -> "+n.info.Device, " Remote region  : addr=0x", "(cm "+n.info.CM+")")
	if strings.Contains(out, "Send") || strings.Contains(out, "s3cret") {
		t.Errorf("--op all with --connect ran SEND or printed the token:\n%s", out)
	}
	for _, title := range []string{"RDMA_Read Latency Test", "RDMA_Write BW Test"} {
		if r := tableRows(out, title); r != 4 {
			t.Errorf("%s: %d rows, want 4:\n%s", title, r, out)
		}
	}

	out, errs, code = execute(t, "perf", "--connect", n.info.CM, "--token", "s3cret", "--op", "send", "--iters", "50", "--sizes", "8,4096", "--window", "16")
	if code != 0 {
		t.Fatalf("send: exit %d: %s", code, errs)
	}
	if tableRows(out, "Send Latency Test") != 2 || tableRows(out, "Send BW Test") != 2 {
		t.Errorf("send tables:\n%s", out)
	}

	// Without the token the node refuses; a message beyond --recv-size fails.
	if _, errs, code = execute(t, "perf", "--connect", n.info.CM, "--op", "read", "--iters", "5", "--size", "8"); code == 0 || !strings.Contains(errs, "bad token") {
		t.Errorf("no token: exit %d: %s", code, errs)
	}
	if _, errs, code = execute(t, "perf", "--connect", n.info.CM, "--token", "s3cret", "--op", "send", "--test", "bw", "--iters", "5", "--size", "8192"); code == 0 || !strings.Contains(errs, "--recv-size") {
		t.Errorf("oversized SEND: exit %d: %s", code, errs)
	}
	m := scrape(t, n.info.Metrics)
	if m[`rdmakit_ops_total{opcode="SEND"}`] < 200 || m[`rdmakit_ops_total{opcode="RDMA_READ"}`] < 400 || m["rdmakit_node_rejected_total"] != 1 {
		t.Errorf("metrics after perf: SEND %v READ %v rejected %v", m[`rdmakit_ops_total{opcode="SEND"}`],
			m[`rdmakit_ops_total{opcode="RDMA_READ"}`], m["rdmakit_node_rejected_total"])
	}
	if code := n.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestPerfConnectNoEcho(t *testing.T) {
	old := perfEchoTimeout(200 * time.Millisecond)
	defer perfEchoTimeout(old)
	n := startNode(t)
	_, errs, code := execute(t, "perf", "--connect", n.info.CM, "--op", "send", "--test", "lat", "--iters", "5", "--size", "8")
	if code == 0 || !strings.Contains(errs, "--echo") {
		t.Errorf("exit %d: %s", code, errs)
	}
	// The bandwidth test needs no echo.
	out, errs, code := execute(t, "perf", "--connect", n.info.CM, "--op", "send", "--test", "bw", "--iters", "100", "--size", "64", "--window", "16")
	if code != 0 || tableRows(out, "Send BW Test") != 1 {
		t.Errorf("exit %d: %s\n%s", code, errs, out)
	}
}

func TestNodeSIGINT(t *testing.T) {
	cmd := exec.Command(os.Args[0], "node", "--log-level", "info", "--uri", "tcp://127.0.0.1:0", "--cm", "127.0.0.1:0", "--metrics", "", "--mem", "64KiB")
	cmd.Env = append(os.Environ(), "RDMAKIT_TEST_MAIN=1")
	// Not StdoutPipe: Wait would close it once the node exits, and the
	// node's last line could be lost unread. Through an io.Pipe, Wait
	// returns once everything the node wrote was taken.
	stdout, pw := io.Pipe()
	cmd.Stdout = pw
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); pw.Close() }) // a failed test leaves no node behind (harmless once it exited)
	var out lockedBuffer
	info := readAnnouncement(t, stdout, &out)
	if info.Metrics != "" || len(info.Regions) != 1 {
		t.Errorf("announcement %+v", info)
	}
	c := dialNode(t, info.CM, nil)
	c.do(t, verbs.OpWrite, 0, 8)
	// The client may be done before the node has finished its side of
	// the exchange; a signal then would cut it (and the count).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stderr.String(), "connection established"); {
		if time.Now().After(deadline) {
			t.Fatalf("the node never logged the connection: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("exit: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the node did not stop on SIGINT")
	}
	pw.Close()
	// The reader took the last line; it may still be copying it.
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(out.String(), "stopped after") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	mustContain(t, out.String(), "metrics  off", "rdmakit node: stopped after 1 connections")
}

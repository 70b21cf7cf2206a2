package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench/sockexp"
)

// sockServeLine is the line `sock serve` prints when it listens.
var sockServeLine = regexp.MustCompile(`^sockexp: listening on (\S+) \(app (\w+)\)\n$`)

// startSockServe runs `rdmakit sock serve ARGS…` from this test binary
// and returns the URI it announced and a function that sends it sig and
// returns its exit error.
func startSockServe(t *testing.T, args ...string) (string, func(os.Signal) error) {
	t.Helper()
	cmd := selfCommand(t.Context(), append([]string{"sock", "serve"}, args...)...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // a failed test leaves no server behind (harmless once it exited)
	line, err := bufio.NewReader(out).ReadString('\n')
	m := sockServeLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("announced %q (%v); stderr: %s", line, err, stderr.String())
	}
	return m[1], func(sig os.Signal) error {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if s := stderr.String(); s != "" {
				t.Logf("stderr: %s", s)
			}
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("sock serve still runs 10 s after %v", sig)
			return nil
		}
	}
}

// `sock serve` echoes over Go's TCP with the port it got for port 0, a
// Unix socket, sock over shm (in SP2C mode) and sock over tcp, and exits
// 0 on SIGTERM and on SIGINT with a client still connected, whose
// connection then fails.
func TestSockServeEcho(t *testing.T) {
	path := filepath.Join(t.TempDir(), "echo.sock")
	for _, tc := range []struct {
		listen string
		sig    os.Signal
	}{{"net+tcp://127.0.0.1:0", syscall.SIGTERM}, {"net+unix://" + path, syscall.SIGINT},
		{fmt.Sprintf("shm://rdmakit-cmdtest-%d?mode=sp2c", os.Getpid()), syscall.SIGTERM}, {"tcp://127.0.0.1:0", syscall.SIGINT}} {
		uri, stop := startSockServe(t, "--listen", tc.listen, "--app", "echo")
		if strings.Contains(uri, ":0") || !strings.HasPrefix(uri, tc.listen[:8]) {
			t.Errorf("listening on %q for %q", uri, tc.listen)
		}
		c, err := sockexp.Dial(t.Context(), uri)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		msg := []byte("hello over " + tc.listen)
		c.Write(msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
			t.Errorf("%s: echo %q, %v", uri, got, err)
		}
		if err := stop(tc.sig); err != nil {
			t.Errorf("%s: exit after %v: %v", uri, tc.sig, err)
		}
		if _, err := c.Read(got); err == nil {
			t.Errorf("%s: the connection outlived the server", uri)
		}
		c.Close()
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("the socket file %s is left", path)
	}
}

// `sock serve --app http` answers hello-world.
func TestSockServeHTTP(t *testing.T) {
	uri, stop := startSockServe(t, "--listen", "net+tcp://127.0.0.1:0", "--app", "http")
	resp, err := http.Get("http://" + strings.TrimPrefix(uri, "net+tcp://") + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != sockexp.HelloBody {
		t.Errorf("GET: %s %q, %v", resp.Status, body, err)
	}
	if err := stop(syscall.SIGTERM); err != nil {
		t.Errorf("exit: %v", err)
	}
}

// Bad flags are refused with a message naming the flag or the URI.
func TestSockServeBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "net+tcp://127.0.0.1:0", "--app", "gopher"}, "--app"},
		{[]string{"--app", "echo"}, "--listen"},
		{[]string{"--listen", "gopher://x"}, "unknown URI scheme"},
		{[]string{"--listen", "127.0.0.1:0"}, "malformed URI"},
		{[]string{"--listen", "net+tcp://256.0.0.1:0"}, "listen net+tcp://256.0.0.1:0"},
	} {
		_, errs, code := execute(t, append([]string{"sock", "serve"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, %q; want an error naming %q", tc.args, code, errs, tc.want)
		}
	}
}

// The sock experiments run through the command, their servers this very
// binary: a quick sock-http over Unix sockets writes its table and files.
func TestBenchSockHTTP(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := execute(t, "bench", "run", "sock-http", "--quick", "--only", "net/unix", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "| system | mode | clients | rate [kreq/s] |", "| net/unix | netpoll | 1 |", "| net/unix | netpoll | 32 |")
	if strings.Contains(out, "| net/tcp |") {
		t.Errorf("--only net/unix ran net/tcp:\n%s", out)
	}
	for _, f := range []string{"sock-http.json", "sock-http.md", "sock-http.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

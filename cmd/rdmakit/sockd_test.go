package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/sock"
	"github.com/rdmakit/rdmakit/sock/sockd"
)

func TestSockdServeAndStatus(t *testing.T) {
	unix := fmt.Sprintf("@rdmakit-sockd-cmd-%d", os.Getpid())
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"quotas": {"web": {"max_conns": 1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb remotedev.LockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"sockd", "serve", "--unix", unix, "--listen", "127.0.0.1:0", "--policy", policy}, &out, &errb)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errb.String())
		}
	}()
	waitOutput(t, &out, "sockd: serving on unix "+unix)

	cp := &sockd.Client{Unix: unix}
	lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer lcancel()
	uri := fmt.Sprintf("shm://sockd-cmd-%d", os.Getpid())
	ln, err := sock.Config{App: "db", Control: cp, Partitions: 2}.Listen(lctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	d := &sock.Dialer{Config: sock.Config{App: "web"}}
	c, err := d.Dial(lctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := d.Dial(lctx, uri); err == nil {
		t.Fatal("second connection of web accepted despite max_conns 1")
	}

	sout, serr, code := execute(t, "sockd", "status", "--unix", unix)
	if code != 0 {
		t.Fatalf("status exited %d: %s", code, serr)
	}
	mustContain(t, sout, "LISTENER", uri, "db", "1 0", "web=1", "APP", "web")
	fields := strings.Fields(lineWith(sout, uri))
	if len(fields) < 2 || fields[len(fields)-2] != "1" || fields[len(fields)-1] != "1" {
		t.Errorf("listener line %q: want 1 admitted, 1 refused", lineWith(sout, uri))
	}
	jout, _, code := execute(t, "sockd", "status", "--unix", unix, "--json")
	if code != 0 {
		t.Fatal("status --json failed")
	}
	mustContain(t, jout, `"uri": "`+uri+`"`, `"conns": [`, `"by_app": {`)

	// SIGHUP re-reads the policy file.
	if err := os.WriteFile(policy, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &out, "sockd: policy reloaded from "+policy)
	c2, err := d.Dial(lctx, uri)
	if err != nil {
		t.Fatalf("after the reload lifted the quota: %v", err)
	}
	c2.Close()
}

func TestSockdStatusWithoutDaemon(t *testing.T) {
	_, serr, code := execute(t, "sockd", "status", "--unix", "@rdmakit-sockd-nobody-here")
	if code == 0 || !strings.Contains(serr, "connect") {
		t.Fatalf("exit %d, stderr %q: want a failure to connect", code, serr)
	}
}

func waitOutput(t *testing.T, out *remotedev.LockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

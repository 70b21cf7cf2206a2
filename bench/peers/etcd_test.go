package peers

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEtcdCluster(t *testing.T) {
	need(t, "etcd", "etcd")
	start := time.Now()
	e, err := StartEtcd(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 members healthy after %v: %v, pids %v, data %s", time.Since(start).Round(time.Millisecond), e.Endpoints, e.Pids(), e.Dir)
	if len(e.Endpoints) != 3 || len(e.Pids()) != 3 {
		t.Fatalf("%d endpoints and %d pids for 3 members", len(e.Endpoints), len(e.Pids()))
	}
	if !isTmpfs(e.Dir) {
		t.Errorf("data directory %s is not on tmpfs", e.Dir)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: time.Second}
	for i, ep := range e.Endpoints {
		if !strings.HasPrefix(ep, "http://127.0.0.1:") || !healthy(t.Context(), hc, ep) {
			t.Errorf("member %d at %s: not a healthy loopback member", i, ep)
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(e.Pids()[i]) + "/cmdline")
		if err == nil && !strings.Contains(string(cmdline), "--unsafe-no-fsync") {
			t.Errorf("member %d runs without --unsafe-no-fsync: %q", i, cmdline)
		}
	}
	pids := e.Pids()
	e.Stop()
	e.Stop() // a second Stop is harmless
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			t.Errorf("member process %d still exists after Stop", p)
		}
	}
	if _, err := os.Stat(e.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s left after Stop: %v", e.Dir, err)
	}
	assertNoChild(t, "etcd")
}

func TestEtcdVersion(t *testing.T) {
	need(t, "etcd", "etcd")
	v, err := EtcdVersion(t.Context())
	if err != nil || !strings.HasPrefix(v, "3.") {
		t.Errorf("EtcdVersion = %q, %v; want 3.x", v, err)
	}
}

func TestEtcdNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := StartEtcd(t.Context(), 3); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install-peers.sh etcd") {
		t.Errorf("StartEtcd: %v, want ErrNotInstalled with a hint", err)
	}
	if _, err := EtcdVersion(t.Context()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("EtcdVersion: %v, want ErrNotInstalled", err)
	}
}

func TestEtcdStaleDirs(t *testing.T) {
	base := t.TempDir()
	// A process that has ended: its pid names a stale directory.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skip(err)
	}
	dead := c.Process.Pid
	if processAlive(dead) {
		t.Skipf("pid %d was reused already", dead)
	}
	stale := filepath.Join(base, etcdDirPrefix+strconv.Itoa(dead)+"-1")
	mine := filepath.Join(base, etcdDirPrefix+strconv.Itoa(os.Getpid())+"-1")
	other := filepath.Join(base, "unrelated-"+strconv.Itoa(dead))
	for _, d := range []string{stale, mine, other} {
		if err := os.MkdirAll(filepath.Join(d, "m0"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleDirs(base, etcdDirPrefix)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s kept: %v", stale, err)
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

func TestEtcdBadMembers(t *testing.T) {
	if _, err := StartEtcd(t.Context(), 0); err == nil {
		t.Error("StartEtcd with 0 members succeeded")
	}
}

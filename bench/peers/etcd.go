package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Etcd is a cluster of etcd members on 127.0.0.1, each its own process,
// started by StartEtcd and ended by Stop. Its data lives on tmpfs and
// its members never fsync, so nobody pays for disks: what a client
// measures is Raft, gRPC and the members' CPU.
type Etcd struct {
	// Endpoints are the members' client URLs, "http://127.0.0.1:PORT",
	// in member order.
	Endpoints []string
	// Dir holds the members' data directories (on tmpfs); Stop removes it.
	Dir     string
	members []*proc
}

// Flags every member runs with.
const (
	// etcdQuota is the backend quota: 8 GiB, etcd's largest advised,
	// far above what a benchmark writes with compaction on, so no run
	// ends in a NOSPACE alarm.
	etcdQuota = 8 << 30
	// etcdCompactRetention keeps the last revisions only (revision-mode
	// auto compaction), so overwritten blocks do not pile up in RAM.
	etcdCompactRetention = 1000
	// etcdSnapshotCount bounds the Raft log a member keeps in memory
	// between snapshots: 10,000 entries (4 KiB blocks: 40 MiB).
	etcdSnapshotCount = 10000
)

// etcdHealthTimeout bounds the wait for a new cluster to elect a leader
// and for every member to report itself healthy.
const etcdHealthTimeout = 30 * time.Second

// etcdDirPrefix names the cluster directories StartEtcd makes, followed
// by this process's id: directories of a process that is gone are
// removed by the next StartEtcd (a benchmark killed with SIGKILL cannot
// clean up; its members die with it, by Pdeathsig).
const etcdDirPrefix = "rdmakit-etcd-"

// ErrNoTmpfs is wrapped by StartEtcd's error when no tmpfs directory is
// writable (/dev/shm, then the temporary directory, are tried).
var ErrNoTmpfs = errors.New("no writable tmpfs directory")

// StartEtcd starts an n-member etcd cluster on free loopback ports, each
// member with --unsafe-no-fsync and its data directory on tmpfs, and
// waits until every member is healthy. The members are killed when ctx
// ends; Stop ends them before and removes their data. A missing etcd
// binary gives an error wrapping ErrNotInstalled.
func StartEtcd(ctx context.Context, n int) (*Etcd, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcd: %d members", n)
	}
	bin, err := lookPath("etcd", "etcd")
	if err != nil {
		return nil, err
	}
	base, err := tmpfsDir()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	removeStaleDirs(base, etcdDirPrefix)
	var lastErr error
	for range startAttempts { // another process may take a port meanwhile
		e, err := startEtcd(ctx, bin, base, n)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// startEtcd makes one attempt at starting the cluster.
func startEtcd(ctx context.Context, bin, base string, n int) (e *Etcd, err error) {
	dir, err := os.MkdirTemp(base, etcdDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	e = &Etcd{Dir: dir}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, fmt.Errorf("etcd: free ports: %w", err)
	}
	token := make([]byte, 8)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	url := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	var cluster []string
	for i := range n {
		cluster = append(cluster, fmt.Sprintf("m%d=%s", i, url(ports[2*i+1])))
	}
	// etcd reads ETCD_* variables as flags: the caller's must not leak in.
	env := childEnv([]string{"ETCD_", "ETCDCTL_"})
	for i := range n {
		client, peer := url(ports[2*i]), url(ports[2*i+1])
		args := []string{
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(cluster, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "rdmakit-" + hex.EncodeToString(token),
			"--unsafe-no-fsync",
			"--quota-backend-bytes", strconv.Itoa(etcdQuota),
			"--auto-compaction-mode", "revision",
			"--auto-compaction-retention", strconv.Itoa(etcdCompactRetention),
			"--snapshot-count", strconv.Itoa(etcdSnapshotCount),
			"--logger", "zap", "--log-level", "error",
		}
		p, err := startProc(ctx, bin, args, env)
		if err != nil {
			return nil, fmt.Errorf("etcd: start member %d: %w", i, err)
		}
		e.members = append(e.members, p)
		e.Endpoints = append(e.Endpoints, client)
	}
	if err := e.waitHealthy(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// waitHealthy polls every member's /health until all say true, failing
// when a member exits or etcdHealthTimeout passes.
func (e *Etcd) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, etcdHealthTimeout)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: time.Second}
	for i, ep := range e.Endpoints {
		for !healthy(ctx, hc, ep) {
			if e.members[i].exited() {
				return fmt.Errorf("etcd: member %d exited before it was healthy: %v: %s", i, e.members[i].err, tail(e.members[i].out.Bytes(), 5))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("etcd: member %d not healthy: %w: %s", i, ctx.Err(), tail(e.members[i].out.Bytes(), 5))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// healthy reports whether the member at endpoint answers its /health
// with "health": "true" (it has a leader and no alarm).
func healthy(ctx context.Context, hc *http.Client, endpoint string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(strings.ReplaceAll(string(body), " ", ""), `"health":"true"`)
}

// EtcdVersion returns the version the installed etcd prints, e.g.
// "3.4.23".
func EtcdVersion(ctx context.Context) (string, error) {
	bin, err := lookPath("etcd", "etcd")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	out, err := runClient(ctx, bin, []string{"--version"}, childEnv([]string{"ETCD_"}))
	if err != nil {
		return "", fmt.Errorf("etcd --version: %w: %s", err, tail(out, 3))
	}
	for l := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "etcd Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("etcd --version printed no version: %s", tail(out, 3))
}

// Pids are the members' process ids, in member order (their CPU time is
// in /proc/PID/stat).
func (e *Etcd) Pids() []int {
	pids := make([]int, len(e.members))
	for i, p := range e.members {
		pids[i] = p.cmd.Process.Pid
	}
	return pids
}

// Stop kills every member, waits for them and removes their data. It may
// be called more than once.
func (e *Etcd) Stop() {
	for _, p := range e.members {
		p.stop()
	}
	if e.Dir != "" {
		os.RemoveAll(e.Dir)
	}
}

// freePorts returns k distinct TCP ports that were free on 127.0.0.1 a
// moment ago: all are held open together, so none repeats.
func freePorts(k int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tmpfsDir returns a writable directory on tmpfs: /dev/shm, or the
// temporary directory if it is tmpfs.
func tmpfsDir() (string, error) {
	for _, d := range []string{"/dev/shm", os.TempDir()} {
		if isTmpfs(d) && writable(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: tried /dev/shm and %s", ErrNoTmpfs, os.TempDir())
}

// writable reports whether a directory can be made in dir.
func writable(dir string) bool {
	d, err := os.MkdirTemp(dir, etcdDirPrefix+"probe-")
	if err != nil {
		return false
	}
	os.Remove(d)
	return true
}

// removeStaleDirs removes the directories in base named prefix, a
// process id and "-…" whose process is gone.
func removeStaleDirs(base, prefix string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, ent := range ents {
		rest, ok := strings.CutPrefix(ent.Name(), prefix)
		if !ok || !ent.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(base, ent.Name()))
	}
}

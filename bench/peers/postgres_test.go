package peers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// needPostgres skips a test when PostgreSQL 15's binaries are missing.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, _, err := postgresBins(""); err != nil {
		t.Skip(err)
	}
}

// startPostgres starts a server for a test and stops it at the end.
func startPostgres(t *testing.T, o PostgresOptions) *Postgres {
	t.Helper()
	needPostgres(t)
	pg, err := StartPostgres(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	return pg
}

// sharedMemory returns the names of the System V shared memory segments
// no process has attached ("sysv:SHMID": a live server is attached to
// its own) and of the POSIX ones PostgreSQL makes (/dev/shm/PostgreSQL.*)
// that exist.
func sharedMemory() map[string]bool {
	set := map[string]bool{}
	if b, err := os.ReadFile("/proc/sysvipc/shm"); err == nil {
		// key shmid perms size cpid lpid nattch …
		for _, l := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 6 && f[6] == "0" {
				set["sysv:"+f[1]] = true
			}
		}
	}
	names, _ := filepath.Glob("/dev/shm/PostgreSQL.*")
	for _, n := range names {
		set[n] = true
	}
	return set
}

// assertNoNewSharedMemory fails when shared memory that was not in
// before exists and stays for two seconds (an initdb of another test
// process makes some for a moment).
func assertNoNewSharedMemory(t *testing.T, before map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var left []string
		for n := range sharedMemory() {
			if !before[n] {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("shared memory left behind: %v", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesInPrefix returns the running processes whose working
// directory starts with prefix (or did before it was removed).
func processesInPrefix(prefix string) []int {
	var pids []int
	links, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, l := range links {
		cwd, err := os.Readlink(l)
		if err != nil || !strings.HasPrefix(cwd, prefix) {
			continue
		}
		if pid, err := strconv.Atoi(strings.Split(l, "/")[2]); err == nil && !ended(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ourDirs returns the directories StartPostgres made for this process.
func ourDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		d, _ := filepath.Glob(filepath.Join(base, postgresDirPrefix+strconv.Itoa(os.Getpid())+"-*"))
		dirs = append(dirs, d...)
	}
	return dirs
}

// assertNothingLeft fails when a server process or directory of this
// process is left.
func assertNothingLeft(t *testing.T, dirs ...string) {
	t.Helper()
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		dirs = append(dirs, filepath.Join(base, postgresDirPrefix+strconv.Itoa(os.Getpid())+"-"))
	}
	for _, d := range dirs {
		if pids := processesInPrefix(d); len(pids) > 0 {
			t.Errorf("processes %v left working in %s…", pids, d)
		}
	}
	if left := ourDirs(t); len(left) > 0 {
		t.Errorf("directories left: %v", left)
	}
	assertNoChild(t, "postgres")
	assertNoChild(t, "initdb")
}

func TestPostgresStartStop(t *testing.T) {
	needPostgres(t)
	shm := sharedMemory()
	start := time.Now()
	pg, err := StartPostgres(t.Context(), PostgresOptions{MaxConnections: 80})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ready after %v as %s in %s", time.Since(start).Round(time.Millisecond), pg.User, pg.Dir)
	c, err := pgx.Connect(t.Context(), pg.ConnString)
	if err != nil {
		pg.Stop()
		t.Fatal(err)
	}
	want := map[string]string{
		"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
		"listen_addresses": "", "unix_socket_directories": pg.Dir, "max_connections": "80",
		"shared_buffers": "128MB",
	}
	for name, w := range want {
		var got string
		if err := c.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&got); err != nil || got != w {
			t.Errorf("%s = %q, %v; want %q", name, got, err, w)
		}
	}
	if pids := pg.Pids(); !slices.Contains(pids, pg.Pid()) || len(pids) < 3 {
		t.Errorf("Pids %v: want the postmaster %d, its background processes and our backend", pids, pg.Pid())
	}
	c.Close(t.Context())
	if os.Geteuid() == 0 {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(pg.Dir, "data"), &st); err != nil || st.Uid == 0 {
			t.Errorf("data directory owned by uid %d (%v), want an unprivileged user", st.Uid, err)
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pg.Pid()) + "/status")
		if err != nil || strings.Contains(string(status), "\nUid:\t0\t") {
			t.Errorf("server runs as root (%v)", err)
		}
	}
	if _, err := os.Stat(filepath.Join(pg.Dir, ".s.PGSQL.5432")); err != nil {
		t.Errorf("no socket in the server's directory: %v", err)
	}
	dir := pg.Dir
	pg.Stop()
	pg.Stop() // a second Stop is harmless
	if syscall.Kill(pg.Pid(), 0) == nil && !ended(pg.Pid()) {
		t.Errorf("server %d still runs after Stop", pg.Pid())
	}
	assertNothingLeft(t, dir)
	assertNoNewSharedMemory(t, shm)
}

func TestPostgresNotInstalled(t *testing.T) {
	empty := t.TempDir()
	if _, err := StartPostgres(t.Context(), PostgresOptions{BinDir: empty}); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install-peers.sh postgres") {
		t.Errorf("StartPostgres: %v, want ErrNotInstalled with a hint", err)
	}
	if _, err := PostgresVersion(t.Context(), empty); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("PostgresVersion: %v, want ErrNotInstalled", err)
	}
}

func TestPostgresBadOptions(t *testing.T) {
	for _, o := range []PostgresOptions{{MaxConnections: -1}, {SharedBufferMB: -5}, {MaxConnections: 1 << 20}} {
		if _, err := StartPostgres(t.Context(), o); err == nil {
			t.Errorf("StartPostgres(%+v) succeeded", o)
		}
	}
}

func TestPostgresVersion(t *testing.T) {
	needPostgres(t)
	v, err := PostgresVersion(t.Context(), "")
	if err != nil || !strings.HasPrefix(v, "15.") {
		t.Errorf("PostgresVersion = %q, %v; want 15.x", v, err)
	}
}

// A server that refuses its settings fails the start and leaves nothing.
func TestPostgresFailedStart(t *testing.T) {
	needPostgres(t)
	_, err := StartPostgres(t.Context(), PostgresOptions{Settings: []string{"no_such_setting_at_all=1"}})
	if !errors.Is(err, ErrPostgresStart) || !strings.Contains(err.Error(), "no_such_setting_at_all") {
		t.Fatalf("StartPostgres with a bad setting: %v, want ErrPostgresStart naming it", err)
	}
	assertNothingLeft(t)
}

// A start whose context ends, during initdb or while the server comes
// up, fails with the context's error and leaves nothing.
func TestPostgresCancelledStart(t *testing.T) {
	needPostgres(t)
	for _, after := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, 700 * time.Millisecond} {
		shm := sharedMemory()
		ctx, cancel := context.WithTimeout(t.Context(), after)
		pg, err := StartPostgres(ctx, PostgresOptions{})
		cancel()
		if err == nil {
			// The machine was fast: the server was up before the end.
			t.Logf("cancelled after %v: started anyway", after)
			pg.Stop()
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancelled after %v: %v, want the deadline", after, err)
		} else {
			t.Logf("cancelled after %v: %v", after, err)
		}
		assertNothingLeft(t)
		assertNoNewSharedMemory(t, shm)
	}
}

// A start whose context ends while it waits for the server to accept
// connections (each connection made to wait by pre_auth_delay) fails
// with the context's error, and leaves nothing.
func TestPostgresCancelledWhileReadying(t *testing.T) {
	needPostgres(t)
	shm := sharedMemory()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := StartPostgres(ctx, PostgresOptions{Settings: []string{"pre_auth_delay=30"}})
	if !errors.Is(err, ErrPostgresStart) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("StartPostgres: %v, want ErrPostgresStart and the deadline", err)
	}
	if !strings.Contains(err.Error(), "not ready") {
		t.Logf("the deadline came before the server started (a slow initdb): %v", err)
	}
	if d := time.Since(start); d > 2*time.Second+2*postgresStopDelay {
		t.Errorf("a start cancelled after 2 s returned after %v", d)
	}
	assertNothingLeft(t)
	assertNoNewSharedMemory(t, shm)
}

// The end of a running server's context stops it and its backends.
func TestPostgresContextEndsServer(t *testing.T) {
	needPostgres(t)
	shm := sharedMemory()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pg, err := StartPostgres(ctx, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	c, err := pgx.Connect(t.Context(), pg.ConnString) // a backend
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	cancel()
	if !pg.p.wait(2 * postgresStopDelay) {
		t.Fatal("server still runs after its context ended")
	}
	deadline := time.Now().Add(postgresStopDelay)
	for len(processesIn(pg.Dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if pids := processesIn(pg.Dir); len(pids) > 0 {
		t.Errorf("backends %v outlive the server", pids)
	}
	if err := c.Ping(t.Context()); err == nil {
		t.Error("a connection still answers after its server's context ended")
	}
	pg.Stop()
	assertNothingLeft(t, pg.Dir)
	assertNoNewSharedMemory(t, shm)
}

func TestConnValueQuotes(t *testing.T) {
	for _, dir := range []string{"/dev/shm/rdmakit-pg-1-2", `/tmp/a b'c\d`} {
		cfg, err := pgconn.ParseConfig("host=" + connValue(dir) + " port=5432 user=u")
		if err != nil {
			t.Errorf("host %q: %v", dir, err)
		} else if cfg.Host != dir {
			t.Errorf("host %q read back as %q", dir, cfg.Host)
		}
	}
}

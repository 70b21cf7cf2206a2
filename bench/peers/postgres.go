package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL server started by StartPostgres for one
// experiment: a fresh cluster in a temporary directory, owned by an
// unprivileged user, reachable only through a unix socket in that
// directory, never syncing to disk. Stop ends it and removes the
// directory.
type Postgres struct {
	// Dir is the temporary directory: the cluster's data (Dir/data) and
	// the server's socket (Dir/.s.PGSQL.5432). Stop removes it.
	Dir string
	// ConnString reaches the server's "postgres" database as its
	// superuser through the socket, for pgx.Connect or pgxpool.New.
	ConnString string
	// User is the operating-system user the server runs as.
	User string
	p    *proc
}

// PostgresOptions configure StartPostgres. The zero value is a server for
// up to 96 clients with 128 MiB of shared buffers.
type PostgresOptions struct {
	// BinDir holds initdb and postgres; empty tries PostgresBinDir, then
	// PATH.
	BinDir string
	// MaxConnections is the server's max_connections (0: 100, enough for
	// 96 clients and the superuser's reserved slots).
	MaxConnections int
	// SharedBufferMB is shared_buffers in MiB (0: 128, PostgreSQL's
	// default and far above what SmallBank and TATP populations need).
	SharedBufferMB int
	// Settings are further "name=value" server settings (-c), after the
	// ones StartPostgres sets.
	Settings []string
}

// PostgresBinDir is where Debian's postgresql-15 installs initdb and
// postgres (not on PATH).
const PostgresBinDir = "/usr/lib/postgresql/15/bin"

// Fixed parts of the server's configuration.
const (
	// postgresPort only names the socket file: the server listens on no
	// TCP address.
	postgresPort = 5432
	// postgresRole is the cluster's superuser, made by initdb.
	postgresRole = "rdmakit"
	// postgresStartTimeout bounds initdb and the wait for the server to
	// accept connections.
	postgresStartTimeout = 60 * time.Second
	// postgresStopDelay is how long a server has to end after SIGINT
	// (fast shutdown: it ends its backends, writes a checkpoint to tmpfs
	// and removes its shared memory) before it is killed.
	postgresStopDelay = 5 * time.Second
	// postgresDirPrefix names the directories StartPostgres makes,
	// followed by this process's id (see etcdDirPrefix).
	postgresDirPrefix = "rdmakit-pg-"
	// maxSocketPath is the longest unix socket path (sun_path less its
	// terminating NUL).
	maxSocketPath = 107
)

// postgresUsers are the users a server started by root runs as, in order
// of preference: PostgreSQL refuses to run as root. Debian's
// postgresql-common makes "postgres"; "nobody" is everywhere.
var postgresUsers = []string{"postgres", "nobody"}

// ErrPostgresStart is wrapped by StartPostgres's error when initdb or the
// server fails (the message carries the end of its output).
var ErrPostgresStart = errors.New("postgres: start failed")

// StartPostgres makes a new cluster with initdb in a temporary directory
// (on tmpfs when there is one) and starts a server on it with fsync,
// synchronous_commit and full_page_writes off, listening on a unix socket
// in that directory only, and waits until it accepts connections. Run by
// root, both run as the user "postgres" (or "nobody"), who owns the
// directory. The server is stopped when ctx ends; Stop stops it before
// and removes the directory. A failed or cancelled start leaves no
// process, no directory and no shared memory behind; one cancelled while
// initdb runs returns when initdb ends (see start). Missing binaries give
// an error wrapping ErrNotInstalled.
func StartPostgres(ctx context.Context, o PostgresOptions) (*Postgres, error) {
	if o.MaxConnections < 0 || o.MaxConnections > 10000 || o.SharedBufferMB < 0 || o.SharedBufferMB > 1<<20 {
		return nil, fmt.Errorf("postgres: max_connections %d, shared_buffers %d MiB: out of range", o.MaxConnections, o.SharedBufferMB)
	}
	initdb, server, err := postgresBins(o.BinDir)
	if err != nil {
		return nil, err
	}
	cred, name, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	base, err := tmpfsDir()
	if err != nil {
		base = os.TempDir()
	}
	removeStaleDirs(base, postgresDirPrefix)
	startCtx, cancel := context.WithTimeout(ctx, postgresStartTimeout)
	defer cancel()
	pg := &Postgres{User: name}
	if err := pg.start(ctx, startCtx, base, initdb, server, cred, o); err != nil {
		pg.Stop()
		return nil, err
	}
	return pg, nil
}

// start makes the directory and the cluster, starts the server (bound to
// ctx) and waits until it is ready (bounded by startCtx).
func (pg *Postgres) start(ctx, startCtx context.Context, base, initdb, server string, cred *syscall.Credential, o PostgresOptions) error {
	dir, err := os.MkdirTemp(base, postgresDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	pg.Dir = dir
	if len(filepath.Join(dir, ".s.PGSQL.5432")) > maxSocketPath {
		return fmt.Errorf("postgres: socket path in %s longer than %d bytes", dir, maxSocketPath)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	env := childEnv([]string{"PG", "LC_", "LANG"}, "LC_ALL=C")
	adjust := asUser(cred, dir)
	data := filepath.Join(dir, "data")
	// initdb runs to its end even when ctx ends (it takes well under a
	// second): its bootstrap backend, interrupted, would leave its
	// shared memory behind. Only postgresStartTimeout cuts it short.
	initCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postgresStartTimeout)
	defer cancel()
	out, err := runInit(initCtx, initdb, []string{
		"-D", data, "-U", postgresRole, "--auth=trust", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C",
	}, env, dir, adjust)
	if err != nil {
		return fmt.Errorf("%w: initdb: %w: %s", ErrPostgresStart, err, tail(out, 5))
	}
	if err := startCtx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrPostgresStart, err)
	}
	pg.p, err = startProc(ctx, server, postgresArgs(data, dir, o), env, adjust, stopBySIGINT)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPostgresStart, err)
	}
	pg.ConnString = fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", connValue(dir), postgresPort, postgresRole)
	return pg.waitReady(startCtx)
}

// connValue quotes a value for a keyword/value connection string.
func connValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// postgresArgs are the server's arguments: data directory and settings.
func postgresArgs(data, sockDir string, o PostgresOptions) []string {
	conns, buffers := o.MaxConnections, o.SharedBufferMB
	if conns == 0 {
		conns = 100
	}
	if buffers == 0 {
		buffers = 128
	}
	settings := []string{
		"listen_addresses=",
		"unix_socket_directories=" + sockDir,
		"port=" + strconv.Itoa(postgresPort),
		"fsync=off",
		"synchronous_commit=off",
		"full_page_writes=off",
		"max_connections=" + strconv.Itoa(conns),
		"shared_buffers=" + strconv.Itoa(buffers) + "MB",
		// Serialization failures are errors: logging each would fill
		// the captured output of a contended run.
		"log_min_messages=fatal",
		"logging_collector=off",
		"huge_pages=off",
		// Dynamic shared memory in files under the data directory, so
		// that even a killed server leaves none in /dev/shm.
		"dynamic_shared_memory_type=mmap",
	}
	settings = append(settings, o.Settings...)
	args := []string{"-D", data}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	return args
}

// waitReady connects until the server answers, failing when it exits or
// ctx ends.
func (pg *Postgres) waitReady(ctx context.Context) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := pgx.Connect(cctx, pg.ConnString)
		cancel()
		if err == nil {
			c.Close(ctx)
			return nil
		}
		if pg.p.exited() {
			return fmt.Errorf("%w: server exited: %v: %s", ErrPostgresStart, pg.p.err, tail(pg.p.out.Bytes(), 5))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: server not ready: %w (last: %v): %s", ErrPostgresStart, ctx.Err(), err, tail(pg.p.out.Bytes(), 5))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pid is the server's (postmaster's) process id; its backends are its
// children.
func (pg *Postgres) Pid() int { return pg.p.cmd.Process.Pid }

// Pids are the server's processes now: the postmaster, its background
// processes and one backend per open connection (found by their working
// directory, the data directory). Their CPU time (in /proc/PID/stat)
// added up before and after a run is the server's CPU for the run, as
// long as the connections stay open in between: a backend that ended
// meanwhile takes its time with it.
func (pg *Postgres) Pids() []int {
	pids := processesIn(pg.Dir)
	slices.Sort(pids)
	return pids
}

// Stop ends the server (fast shutdown: its backends end with it), waits
// for it and removes the directory. It may be called more than once.
func (pg *Postgres) Stop() {
	if pg.p != nil {
		pg.p.stop()
	}
	if pg.Dir != "" {
		// Backends outlive a server killed after postgresStopDelay: end
		// them, and remove the shared memory it left, before the files.
		killProcessesIn(pg.Dir, postgresStopDelay)
		if pg.p != nil {
			removeOrphanSegments(pg.Pid())
		}
		os.RemoveAll(pg.Dir)
	}
}

// PostgresVersion returns the version the server binary prints, e.g.
// "15.18"; binDir as in PostgresOptions.
func PostgresVersion(ctx context.Context, binDir string) (string, error) {
	_, server, err := postgresBins(binDir)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	out, err := runClient(ctx, server, []string{"--version"}, childEnv([]string{"PG"}))
	if err != nil {
		return "", fmt.Errorf("postgres --version: %w: %s", err, tail(out, 3))
	}
	// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
	f := strings.Fields(string(out))
	if len(f) < 3 || f[1] != "(PostgreSQL)" {
		return "", fmt.Errorf("postgres --version printed %q", tail(out, 1))
	}
	return f[2], nil
}

// postgresBins finds initdb and postgres in binDir, or in PostgresBinDir
// then PATH when binDir is empty.
func postgresBins(binDir string) (initdb, server string, err error) {
	where := binDir
	if binDir == "" {
		binDir, where = PostgresBinDir, PostgresBinDir+" or PATH"
	}
	initdb, server = filepath.Join(binDir, "initdb"), filepath.Join(binDir, "postgres")
	if executable(initdb) && executable(server) {
		return initdb, server, nil
	}
	if where != binDir {
		i, errI := exec.LookPath("initdb")
		s, errS := exec.LookPath("postgres")
		if errI == nil && errS == nil {
			return i, s, nil
		}
	}
	return "", "", fmt.Errorf("%w: initdb and postgres not found in %s (install them with %s postgres)", ErrNotInstalled, where, InstallHint)
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// postgresCredential returns the credential initdb and the server run
// with: nil when we are not root (they run as us), else the first of
// postgresUsers that exists.
func postgresCredential() (*syscall.Credential, string, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return nil, strconv.Itoa(os.Geteuid()), nil
		}
		return nil, u.Username, nil
	}
	for _, name := range postgresUsers {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, errU := strconv.ParseUint(u.Uid, 10, 32)
		gid, errG := strconv.ParseUint(u.Gid, 10, 32)
		if errU != nil || errG != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, name, nil
	}
	return nil, "", fmt.Errorf("postgres: running as root and none of the users %s exists (PostgreSQL refuses to run as root)", strings.Join(postgresUsers, ", "))
}

// runInit runs initdb to completion within ctx (adjusted by adjust),
// then makes sure none of its processes is left in dir (a killed
// initdb's bootstrap backend outlives it), and returns the combined
// output and Wait's error.
func runInit(ctx context.Context, bin string, args, env []string, dir string, adjust func(*exec.Cmd)) ([]byte, error) {
	out := &syncBuffer{}
	cmd := command(ctx, bin, args, env, out)
	adjust(cmd)
	err := cmd.Run()
	if cmd.Process != nil {
		killProcessesIn(dir, postgresStopDelay)
		removeOrphanSegments(cmd.Process.Pid)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return out.Bytes(), err
}

// asUser runs a command as cred (nil: as us) in dir.
func asUser(cred *syscall.Credential, dir string) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		cmd.Dir = dir
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = cred
	}
}

// stopBySIGINT ends the server, when its context ends, by a fast
// shutdown (SIGINT) and kills it only if it is still there
// postgresStopDelay later. An immediate shutdown (SIGQUIT), like a
// kill, would leave the server's System V interlock segment and its
// dynamic shared memory behind: PostgreSQL removes them at the next
// start on the same data directory, which never comes.
func stopBySIGINT(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = postgresStopDelay
}

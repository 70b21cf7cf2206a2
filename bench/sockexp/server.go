package sockexp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
)

// server is `rdmakit sock serve` in its own process.
type server struct {
	// uri is what it announced: where its clients dial.
	uri    string
	cmd    *exec.Cmd
	done   chan struct{} // closed when it has exited
	stderr *bench.Tail
}

// serverStartup bounds how long a server takes to say where it listens.
const serverStartup = 30 * time.Second

// listenLine is how ServeURI announces where it listens.
var listenLine = regexp.MustCompile(`listening on (\S+) \(app `)

// startServer runs `rdmakit sock serve --listen uri --app app ARGS…`
// through env.Command and waits until it says where it listens. It is
// killed when ctx ends; stop ends it before. bench.ErrNoCommand when env
// has no Command.
// startSystem starts n's server running app. Without a command to start
// it (bench.ErrNoCommand) it returns nil and no error and says in notes
// that n has no rows.
func startSystem(ctx context.Context, env *bench.Env, n network, app App, notes *[]string) (*server, error) {
	srv, err := startServer(ctx, env, n.listen(), app, n.serveArgs...)
	if errors.Is(err, bench.ErrNoCommand) {
		*notes = append(*notes, fmt.Sprintf("%s: no rows: %v.", n.label(), err))
		return nil, nil
	}
	return srv, err
}

func startServer(ctx context.Context, env *bench.Env, uri string, app App, args ...string) (*server, error) {
	if env.Command == nil {
		return nil, bench.ErrNoCommand
	}
	args = append([]string{"sock", "serve", "--listen", uri, "--app", string(app)}, args...)
	s := &server{done: make(chan struct{}), stderr: &bench.Tail{}}
	s.cmd = env.Command(ctx, args...)
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = childAttr()
	s.cmd.WaitDelay = time.Second
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("sockexp: start %s: %w", strings.Join(args, " "), err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	announced := make(chan []string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		announced <- listenLine.FindStringSubmatch(line)
		r.WriteTo(discard{}) // the rest of its output
	}()
	t := time.NewTimer(serverStartup)
	defer t.Stop()
	select {
	case m := <-announced:
		if m != nil {
			s.uri = m[1]
			return s, nil
		}
		err = errors.New("it did not say where it listens")
	case <-t.C:
		err = fmt.Errorf("it did not listen within %v", serverStartup)
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.stop()
	return nil, fmt.Errorf("sockexp: %s: %w: %s", strings.Join(args, " "), err, s.stderr.String())
}

// stop ends the server with SIGINT (its graceful shutdown), kills it if
// it has not exited 5 s later, and waits for it.
func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.cmd.Process.Kill()
		<-s.done
	}
}

// exited reports whether the server has exited, with what it last wrote
// to stderr.
func (s *server) exited() (bool, string) {
	select {
	case <-s.done:
		return true, s.stderr.String()
	default:
		return false, ""
	}
}

// discard drops what is written to it.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

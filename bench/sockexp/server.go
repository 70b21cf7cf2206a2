package sockexp

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/rdmakit/rdmakit/bench"
)

// server is `rdmakit sock serve` in its own process.
type server struct {
	// uri is what it announced: where its clients dial.
	uri string
	*bench.Child
}

// serverStartup bounds how long a server takes to say where it listens.
const serverStartup = 30 * time.Second

// listenLine is how ServeURI announces where it listens.
var listenLine = regexp.MustCompile(`listening on (\S+) \(app `)

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

// startServer runs `rdmakit sock serve --listen uri --app app ARGS…`
// through env.Command and waits until it says where it listens
// (bench.StartChild).
func startServer(ctx context.Context, env *bench.Env, uri string, app App, args ...string) (*server, error) {
	s := &server{}
	c, err := bench.StartChild(ctx, env, serverStartup, func(line string) error {
		m := listenLine.FindStringSubmatch(line)
		if m == nil {
			return errors.New("it did not say where it listens")
		}
		s.uri = m[1]
		return nil
	}, append([]string{"sock", "serve", "--listen", uri, "--app", string(app)}, args...)...)
	if err != nil {
		if errors.Is(err, bench.ErrNoCommand) {
			return nil, err
		}
		return nil, fmt.Errorf("sockexp: %w", err)
	}
	s.Child = c
	return s, nil
}

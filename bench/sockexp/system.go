package sockexp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/bench"
)

// network is one way of carrying a connection's bytes between the
// experiment's process and a server in another process: the system of
// a row.
type network struct {
	// name and transport name the system, as NAME/TRANSPORT in the
	// rows and for bench.Options.Only ("net/tcp", "sock/shm").
	name, transport string
	// mode says how its connections are driven (the mode column).
	mode string
	// listen returns the URI a fresh server listens on.
	listen func() string
	// serveArgs are further arguments of `rdmakit sock serve`.
	serveArgs []string
	// dial connects to the URI the server announced.
	dial func(ctx context.Context, uri string) (net.Conn, error)
}

// label is the system column: NAME/TRANSPORT.
func (n network) label() string { return n.name + "/" + n.transport }

// The baselines' labels, the denominators of the ratios.
const (
	tcpLabel  = "net/tcp"
	unixLabel = "net/unix"
)

// listenSeq makes the names of abstract Unix sockets and shared-memory
// windows unique within the process.
var listenSeq atomic.Int64

// uniqueName is a name no other server of this process has used.
func uniqueName(kind string) string {
	return fmt.Sprintf("rdmakit-sockexp-%s-%d-%d", kind, os.Getpid(), listenSeq.Add(1))
}

// netNets are the baselines: Go's net package over loopback TCP and
// over a Unix domain socket (abstract namespace), both driven by Go's
// netpoller.
func netNets() []network {
	return []network{
		{name: "net", transport: "tcp", mode: "netpoll", dial: Dial,
			listen: func() string { return "net+tcp://127.0.0.1:0" }},
		{name: "net", transport: "unix", mode: "netpoll", dial: Dial,
			listen: func() string { return "net+unix://@" + uniqueName("uds") }},
	}
}

// errNoSystem: Options.Only left no system to run.
var errNoSystem = errors.New("sockexp: no system selected")

// selected returns the labels env's Only selects among candidates
// (each NAME/TRANSPORT), or an error naming the choices when it selects
// none.
func selected(env *bench.Env, candidates [][2]string) ([]bool, error) {
	keep := make([]bool, len(candidates))
	var names []string
	any := false
	for i, c := range candidates {
		names = append(names, c[0]+"/"+c[1])
		keep[i] = env.Keeps(c[0], c[1])
		any = any || keep[i]
	}
	if !any {
		return nil, fmt.Errorf("%w: --only %s names none of this experiment's systems (%s)",
			errNoSystem, strings.Join(env.Only, ","), strings.Join(names, ", "))
	}
	return keep, nil
}

// candidates are the networks' (name, transport) pairs.
func candidates(nets []network) [][2]string {
	c := make([][2]string, len(nets))
	for i, n := range nets {
		c[i] = [2]string{n.name, n.transport}
	}
	return c
}

// transports is the result's transport: the systems measured.
func transports(nets []network) string {
	var s []string
	for _, n := range nets {
		s = append(s, n.label()+" ("+n.mode+")")
	}
	return strings.Join(s, ", ")
}

// keepNets returns the networks env selects, or errNoSystem.
func keepNets(env *bench.Env, nets []network) ([]network, error) {
	keep, err := selected(env, candidates(nets))
	if err != nil {
		return nil, err
	}
	var out []network
	for i, n := range nets {
		if keep[i] {
			out = append(out, n)
		}
	}
	return out, nil
}

package sockexp

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/sock"
)

// The sock schemes: shm://NAME and tcp://HOST:PORT, each optionally
// followed by a query that configures this side's sock.Config:
//
//	mode=direct|sp2c|spsc  partitions=N  ring=BYTES  mtu=BYTES
//	batch=N                spin=DURATION  slicing=0|1
//
// batch=-1 lifts the per-turn batch limit and slicing=0 sends each Write
// in as few records as the ring allows (sock.Config.NoSlicing): the
// isolation experiment's "off" rows.
//
// e.g. shm://web?mode=sp2c&partitions=1. A listener's URI keeps its query,
// so that its clients dial with the same settings.
func init() {
	registerScheme("shm", sockScheme("shm"))
	registerScheme("tcp", sockScheme("tcp"))
}

// sockNets returns the systems of rdmakit's sock package (net.Conn over
// remote-memory rings) that the experiments measure next to the
// baselines: sock over shared memory and over the tcp verbs transport,
// both in Direct mode (the application's goroutines move the records:
// the fewest goroutines, for a 2-core machine), and over shared memory
// in SPSC mode (one goroutine per partition and side does both
// directions).
func sockNets() []network {
	shm := func(mode string) network {
		return network{name: "sock", transport: "shm", mode: mode, dial: Dial,
			listen: func() string { return "shm://" + uniqueName("shm") + "?mode=" + mode }}
	}
	return []network{
		shm("direct"),
		{name: "sock", transport: "tcp", mode: "direct", dial: Dial,
			listen: func() string { return "tcp://127.0.0.1:0?mode=direct" }},
		shm("spsc"),
	}
}

// sockNote says what the sock rows measured.
func sockNote() string {
	return fmt.Sprintf("sock/shm and sock/tcp are rdmakit's sock package (net.Conn over rings in the peer's registered memory, "+
		"written by one-sided WRITEs) over the shm and tcp verbs transports, default settings on both sides: %d partitions of %d MiB rings, "+
		"%d KiB MTU, %d records per turn, pollers spin %v then park; the clients of a system share one sock.Dialer (one link per server). "+
		"Mode direct: the application's goroutines move the records; spsc: one goroutine per partition and side does both directions.",
		sock.DefaultPartitions, sock.DefaultRingSize>>20, sock.DefaultMTU>>10, sock.DefaultBatchLimit, sock.DefaultSpin)
}

// sockScheme listens and dials sock over transport ("shm" or "tcp").
func sockScheme(transport string) scheme {
	return scheme{
		Listen: func(ctx context.Context, addr string) (net.Listener, error) {
			host, query, cfg, err := sockConfig(addr)
			if err != nil {
				return nil, err
			}
			ln, err := cfg.Listen(ctx, transport+"://"+host)
			if err != nil {
				return nil, err
			}
			return &sockListener{Listener: ln, query: query}, nil
		},
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			host, query, cfg, err := sockConfig(addr)
			if err != nil {
				return nil, err
			}
			return dialerFor(query, cfg).Dial(ctx, transport+"://"+host)
		},
		Addr: func(ln net.Listener) string {
			a := strings.TrimPrefix(ln.Addr().String(), transport+"://")
			if sl, ok := ln.(*sockListener); ok && sl.query != "" {
				a += "?" + sl.query
			}
			return a
		},
	}
}

// sockListener is a sock listener that remembers its URI's query.
type sockListener struct {
	net.Listener
	query string
}

// sockConfig splits addr into host and query and parses the query into
// a sock.Config.
func sockConfig(addr string) (host, query string, cfg sock.Config, err error) {
	host, query, _ = strings.Cut(addr, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", cfg, fmt.Errorf("%w: query %q: %v", ErrURI, query, err)
	}
	for key, vs := range q {
		v := vs[len(vs)-1]
		var perr error
		switch key {
		case "mode":
			cfg.Mode, perr = sock.ParseMode(v)
		case "partitions":
			cfg.Partitions, perr = strconv.Atoi(v)
		case "ring":
			cfg.RingSize, perr = strconv.Atoi(v)
		case "mtu":
			cfg.MTU, perr = strconv.Atoi(v)
		case "batch":
			cfg.BatchLimit, perr = strconv.Atoi(v)
		case "spin":
			cfg.Spin, perr = time.ParseDuration(v)
		case "slicing":
			var on bool
			on, perr = strconv.ParseBool(v)
			cfg.NoSlicing = !on
		default:
			perr = fmt.Errorf("unknown setting (mode, partitions, ring, mtu, batch, spin, slicing)")
		}
		if perr != nil {
			return "", "", cfg, fmt.Errorf("%w: %s=%s: %v", ErrURI, key, v, perr)
		}
	}
	return host, query, cfg, nil
}

// dialers are the sock.Dialers of this process, one per configuration:
// a Dialer's links (one per peer endpoint) carry all its connections,
// as a sock client's would.
var (
	dialersMu sync.Mutex
	dialers   = map[string]*sock.Dialer{}
)

// dialerFor returns the Dialer of the configuration query (parsed as
// cfg).
func dialerFor(query string, cfg sock.Config) *sock.Dialer {
	dialersMu.Lock()
	defer dialersMu.Unlock()
	d, ok := dialers[query]
	if !ok {
		d = &sock.Dialer{Config: cfg}
		dialers[query] = d
	}
	return d
}

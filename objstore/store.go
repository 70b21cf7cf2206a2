package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// DefaultMaxOutstanding is Config.MaxOutstanding's default.
const DefaultMaxOutstanding = 256

// Config configures a Store.
type Config struct {
	// Mem is the arena's size in bytes: all objects (data and metadata)
	// live in it. Pages cost memory only once touched.
	Mem int64
	// Socket is the Unix domain socket clients connect to: a path, or
	// "@name" for a name in the abstract namespace. Empty picks a fresh
	// abstract name (Addr tells it).
	Socket string
	// MaxObjectSize bounds an object's data plus metadata; 0 means Mem.
	MaxObjectSize int64
	// Fetcher serves Client.Fetch by pulling objects from other stores;
	// nil makes every Fetch of a missing object fail with ErrUnavailable.
	Fetcher object.Fetcher
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
	// MaxOutstanding bounds each client's requests the store has read and
	// not yet answered (blocked Gets and running Fetches included): past
	// it the store stops reading that client's socket. Half of it bounds
	// the client's blocked Gets (more fail with ErrBusy). 0 means
	// DefaultMaxOutstanding.
	MaxOutstanding int
}

// Store is an object store: an arena of shared memory holding immutable
// objects, served to local clients over a Unix domain socket and to the
// transfer layer through Source and Sink.
type Store struct {
	cfg   Config
	log   *slog.Logger
	arena *arena
	ln    *net.UnixListener
	addr  string

	mu          sync.Mutex
	alloc       *allocator
	objects     map[ID]*entry
	lru         lru
	waiting     map[ID][]*waiter // blocked Gets by the IDs they wait for
	sessions    map[*session]struct{}
	subscribed  map[*session]struct{} // sessions with subscriptions
	sink        *session              // the owner of objects Sink creates
	nextSession uint64
	refs, pins  int
	waiters     int
	subscribers int
	fetches     int
	evictions   int64
	closed      bool

	done     chan struct{} // closed by Close
	sessWG   sync.WaitGroup
	closeErr error
	once     sync.Once
}

// NewStore makes a store with an arena of cfg.Mem bytes and binds
// cfg.Socket, so clients may Connect as soon as it returns (their
// connections are served once Serve runs).
func NewStore(cfg Config) (*Store, error) {
	if cfg.Mem <= 0 {
		return nil, fmt.Errorf("%w: store memory %d", ErrBadSize, cfg.Mem)
	}
	if cfg.MaxObjectSize <= 0 || cfg.MaxObjectSize > cfg.Mem {
		cfg.MaxObjectSize = cfg.Mem
	}
	if cfg.MaxOutstanding <= 0 {
		cfg.MaxOutstanding = DefaultMaxOutstanding
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Socket == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Socket = "@rdmakit-objstore-" + hex.EncodeToString(b[:])
	}
	a, err := newArena(cfg.Mem)
	if err != nil {
		return nil, err
	}
	ln, err := listen(cfg.Socket)
	if err != nil {
		a.close()
		return nil, err
	}
	s := &Store{
		cfg:        cfg,
		log:        cfg.Logger.With("store", cfg.Socket),
		arena:      a,
		ln:         ln,
		addr:       cfg.Socket,
		alloc:      newAllocator(cfg.Mem),
		objects:    map[ID]*entry{},
		waiting:    map[ID][]*waiter{},
		sessions:   map[*session]struct{}{},
		subscribed: map[*session]struct{}{},
		done:       make(chan struct{}),
	}
	s.sink = newSession(s, 0, nil)
	return s, nil
}

// Addr is the socket clients connect to (Config.Socket, or the abstract
// name NewStore picked).
func (s *Store) Addr() string { return s.addr }

// Serve accepts and serves clients until ctx ends or Close is called; in
// both cases the store is closed and Serve returns nil. Any other accept
// error closes the store and is returned.
func (s *Store) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.Close()
			return fmt.Errorf("objstore: accept: %w", err)
		}
		s.startSession(c)
	}
}

// Close stops the store: it stops listening, disconnects every client
// (whose calls then fail with ErrDisconnected) and unmaps the arena
// unless the transfer layer still pins or fills objects in it (then the
// mapping stays until the process ends, so their slices stay valid).
func (s *Store) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.done)
		sessions := make([]*session, 0, len(s.sessions))
		for c := range s.sessions {
			sessions = append(sessions, c)
		}
		s.mu.Unlock()
		err := s.ln.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		for _, c := range sessions {
			c.close()
		}
		s.sessWG.Wait()
		s.mu.Lock()
		inUse := s.pins > 0 || len(s.sink.created) > 0
		s.mu.Unlock()
		if inUse {
			s.log.Warn("objstore: arena left mapped at close: the transfer layer still uses it")
		} else if aerr := s.arena.close(); err == nil {
			err = aerr
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Source is the store as the transfer layer's holder side.
func (s *Store) Source() object.Source { return source{s} }

// Sink is the store as the transfer layer's fetcher side.
func (s *Store) Sink() object.Sink { return sink{s} }

// Stats returns the store's counters now.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{
		Objects:        len(s.objects),
		BytesAllocated: s.alloc.used,
		BytesFree:      s.alloc.freeBytes(),
		ArenaBytes:     s.alloc.size,
		LargestFree:    s.alloc.largest(),
		Clients:        len(s.sessions),
		References:     s.refs,
		Pins:           s.pins,
		Evictable:      s.lru.len(),
		Evictions:      s.evictions,
		Waiters:        s.waiters,
		Subscribers:    s.subscribers,
		Fetches:        s.fetches,
	}
	for _, e := range s.objects {
		if e.sealed {
			st.Sealed++
		}
	}
	st.Unsealed = st.Objects - st.Sealed
	for c := range s.sessions {
		st.PendingReplies += c.pending()
	}
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		if r, err := s.arena.resident(); err == nil {
			st.ResidentBytes = r
		}
	}
	return st
}

// listen binds socket. A socket file left by a store that died (nobody
// accepts on it) is removed and bound again; a live store's is not.
func listen(socket string) (*net.UnixListener, error) {
	addr := &net.UnixAddr{Name: socket, Net: "unix"}
	ln, err := net.ListenUnix("unix", addr)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && !strings.HasPrefix(socket, "@") {
		if fi, serr := os.Stat(socket); serr == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, derr := net.DialTimeout("unix", socket, time.Second); derr == nil {
				c.Close()
				return nil, fmt.Errorf("objstore: listen on %s: a store is serving there: %w", socket, err)
			}
			if rerr := os.Remove(socket); rerr == nil {
				ln, err = net.ListenUnix("unix", addr)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: listen on %s: %w", socket, err)
	}
	return ln, nil
}

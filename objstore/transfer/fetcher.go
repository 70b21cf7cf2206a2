package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// Fetcher pulls objects from holders (Servers) into a Sink; it
// implements object.Fetcher. It keeps one pair per holder for the verbs
// protocols and idle connections per holder for the TCP ones, and
// remembers where each ID was last found. It is safe for concurrent use.
type Fetcher struct {
	cfg   Config
	log   *slog.Logger
	stats counters
	tcp   tcpPool

	mu      sync.Mutex
	closed  bool
	pairs   map[string]*pairEntry // the pair in use, by holder address
	all     map[*fpair]struct{}   // every pair not yet released
	flights map[object.ID]*flight
	where   map[object.ID]string
}

var _ object.Fetcher = (*Fetcher)(nil)

type pairEntry struct {
	ready chan struct{}
	p     *fpair
	err   error
}

type flight struct {
	done chan struct{}
	err  error
}

// maxWhere bounds the memory of where IDs were found.
const maxWhere = 1 << 16

// NewFetcher makes a fetcher. The verbs protocols need cfg.Device.
func NewFetcher(cfg Config) (*Fetcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Protocol.Verbs() && cfg.Device == nil {
		return nil, fmt.Errorf("%w: protocol %v needs a verbs device (Config.Device)", verbs.ErrInvalidArg, cfg.Protocol)
	}
	cfg.Peers = append([]string(nil), cfg.Peers...)
	f := &Fetcher{
		cfg:     cfg,
		log:     cfg.Logger.With("objstore/transfer", "fetcher"),
		pairs:   map[string]*pairEntry{},
		all:     map[*fpair]struct{}{},
		flights: map[object.ID]*flight{},
		where:   map[object.ID]string{},
	}
	f.tcp.init(&f.cfg)
	return f, nil
}

// Config returns the fetcher's configuration, defaults filled in.
func (f *Fetcher) Config() Config { return f.cfg }

// Stats returns the fetcher's counters.
func (f *Fetcher) Stats() Stats { return f.stats.snapshot() }

// Fetch implements object.Fetcher: it makes every object of ids present
// in sink, up to Config.Concurrency transfers at once. errs[i] is nil
// when ids[i] was fetched or was already present (the sink's Create said
// object.ErrExists), otherwise an error wrapping object.ErrUnavailable
// (no peer has it, or every peer that was asked failed; a peer's
// malformed messages add object.ErrProtocol), the sink's error
// (object.ErrStoreFull) or ctx's error. Concurrent fetches of one ID
// (in this call or others) create it once: later callers wait for the
// first one's result.
func (f *Fetcher) Fetch(ctx context.Context, ids []object.ID, sink object.Sink) []error {
	errs := make([]error, len(ids))
	if len(ids) == 1 {
		errs[0] = f.fetchShared(ctx, ids[0], sink)
		return errs
	}
	sem := make(chan struct{}, f.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = fmt.Errorf("transfer: fetch %v: %w", id, ctx.Err())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.fetchShared(ctx, id, sink)
			<-sem
		}()
	}
	wg.Wait()
	return errs
}

// fetchShared is fetchOne behind a singleflight keyed by ID.
func (f *Fetcher) fetchShared(ctx context.Context, id object.ID, sink object.Sink) error {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return fmt.Errorf("transfer: fetch %v: %w", id, object.ErrClosed)
		}
		if fl := f.flights[id]; fl != nil {
			f.mu.Unlock()
			select {
			case <-fl.done:
			case <-ctx.Done():
				return fmt.Errorf("transfer: fetch %v: %w", id, ctx.Err())
			}
			if isCtxErr(fl.err) && ctx.Err() == nil {
				continue // the first caller gave up, not the transfer
			}
			return fl.err
		}
		fl := &flight{done: make(chan struct{})}
		f.flights[id] = fl
		f.mu.Unlock()
		fl.err = f.fetchOne(ctx, id, sink)
		f.mu.Lock()
		delete(f.flights, id)
		f.mu.Unlock()
		close(fl.done)
		return fl.err
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// fetchOne asks the peers in order, the one where id was last found
// first, until one has it.
func (f *Fetcher) fetchOne(ctx context.Context, id object.ID, sink object.Sink) error {
	f.mu.Lock()
	first := f.where[id]
	f.mu.Unlock()
	var errs []error
	try := func(peer string) (bool, error) {
		p, n, err := f.fetchFrom(ctx, peer, id, sink, f.cfg.Protocol)
		switch {
		case err == nil:
			f.stats.done(p, n)
			f.remember(id, peer)
			return true, nil
		case errors.Is(err, object.ErrExists):
			return true, nil
		case ctx.Err() != nil:
			f.stats.failed.Add(1)
			return true, fmt.Errorf("transfer: fetch %v from %s: %w", id, peer, errors.Join(ctx.Err(), err))
		case errors.Is(err, object.ErrStoreFull), errors.Is(err, object.ErrBadSize), errors.Is(err, object.ErrClosed):
			f.stats.failed.Add(1)
			return true, fmt.Errorf("transfer: fetch %v from %s: %w", id, peer, err)
		case errors.Is(err, object.ErrNotFound):
			f.stats.notFound.Add(1)
		}
		errs = append(errs, err)
		return false, nil
	}
	if first != "" {
		if done, err := try(first); done {
			return err
		}
	}
	for _, peer := range f.cfg.Peers {
		if peer == first {
			continue
		}
		if done, err := try(peer); done {
			return err
		}
	}
	f.stats.failed.Add(1)
	if len(errs) == 0 {
		return fmt.Errorf("%w: %v: no peers", object.ErrUnavailable, id)
	}
	return fmt.Errorf("%w: %v: %w", object.ErrUnavailable, id, errors.Join(errs...))
}

func (f *Fetcher) remember(id object.ID, peer string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.where[id] == peer {
		return
	}
	if len(f.where) >= maxWhere {
		clear(f.where)
	}
	f.where[id] = peer
}

// fetchFrom moves id from one peer by proto and returns the protocol
// that moved it and its size.
func (f *Fetcher) fetchFrom(ctx context.Context, peer string, id object.ID, sink object.Sink, proto Protocol) (Protocol, int, error) {
	if !proto.Verbs() {
		return f.tcpFetch(ctx, peer, id, sink, proto)
	}
	p, err := f.pairFor(ctx, peer)
	if err != nil {
		return 0, 0, err
	}
	return p.fetch(ctx, id, sink, proto, uint64(f.cfg.Threshold))
}

// pairFor returns the pair to peer, dialing it when there is none (or
// the cached one failed). Concurrent callers share one dial.
func (f *Fetcher) pairFor(ctx context.Context, peer string) (*fpair, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, object.ErrClosed
		}
		e := f.pairs[peer]
		if e == nil {
			e = &pairEntry{ready: make(chan struct{})}
			f.pairs[peer] = e
			f.mu.Unlock()
			e.p, e.err = f.dial(ctx, peer)
			if e.err != nil {
				f.mu.Lock()
				if f.pairs[peer] == e {
					delete(f.pairs, peer)
				}
				f.mu.Unlock()
			}
			close(e.ready)
			return e.p, e.err
		}
		f.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		if e.p.failure() == nil {
			return e.p, nil
		}
		f.forget(peer, e.p)
	}
}

// dial connects a new pair to the holder at peer.
func (f *Fetcher) dial(ctx context.Context, peer string) (*fpair, error) {
	p, err := newPair(f.cfg.Device, &f.cfg, &f.stats, peer)
	if err != nil {
		return nil, err
	}
	fp := newFPair(p)
	p.onFail = func() {
		fp.failAll()
		f.forget(peer, fp)
	}
	conn, err := cm.Dial(ctx, f.cfg.Device, peer, p.options())
	if err != nil {
		p.releaseResources()
		return nil, fmt.Errorf("%w: connect to %s: %w", object.ErrUnavailable, peer, err)
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		_ = conn.Close()
		p.releaseResources()
		return nil, object.ErrClosed
	}
	f.all[fp] = struct{}{}
	f.mu.Unlock()
	go func() {
		<-p.freed
		f.mu.Lock()
		delete(f.all, fp)
		f.mu.Unlock()
	}()
	if err := p.start(conn); err != nil {
		p.fail(err)
		return nil, err
	}
	f.stats.pairs.Add(1)
	return fp, nil
}

// forget drops a failed pair from the cache, so the next fetch dials.
func (f *Fetcher) forget(peer string, fp *fpair) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.pairs[peer]; e != nil && e.p == fp {
		delete(f.pairs, peer)
	}
}

// Close closes every pair and connection; transfers in progress fail
// with object.ErrClosed. Close waits until every pair's resources are
// released.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	ps := make([]*fpair, 0, len(f.all))
	for p := range f.all {
		ps = append(ps, p)
	}
	f.mu.Unlock()
	for _, p := range ps {
		p.close()
	}
	f.tcp.close()
	return nil
}

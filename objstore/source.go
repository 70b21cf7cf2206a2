package objstore

import (
	"fmt"
	"sync"
)

// source is the store as object.Source: the transfer layer's holder side.
type source struct{ s *Store }

// Pin holds the sealed object id (no eviction, no Delete) until release.
func (src source) Pin(id ID) ([]byte, int, func(), error) {
	s := src.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, nil, ErrClosed
	}
	e, ok := s.objects[id]
	if !ok || !e.sealed {
		return nil, 0, nil, fmt.Errorf("%w: pin %s", ErrNotFound, id)
	}
	e.pins++
	s.pins++
	s.lru.touch(e)
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			e.pins--
			s.pins--
			s.lru.touch(e)
		})
	}
	end := e.off + e.dataSize + e.metaSize
	return s.arena.mem[e.off:end:end], int(e.dataSize), release, nil
}

// sink is the store as object.Sink: the transfer layer's fetcher side.
// Its objects are owned by the store itself (s.sink), hold no client
// reference, and are invisible until commit.
type sink struct{ s *Store }

// Create makes an unsealed object for the transfer layer to fill.
func (sk sink) Create(id ID, dataSize, metaSize int) ([]byte, func() error, func(), error) {
	s := sk.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.create(s.sink, id, int64(dataSize), int64(metaSize), nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("objstore: sink: %w", err)
	}
	var once sync.Once
	commit := func() error {
		err := fmt.Errorf("%w: %s committed or aborted already", ErrSealed, id)
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			err = s.seal(s.sink, id)
		})
		return err
	}
	abort := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if err := s.abort(s.sink, id); err != nil {
				s.log.Warn("objstore: sink abort", "id", id, "err", err)
			}
		})
	}
	end := e.off + e.dataSize + e.metaSize
	return s.arena.mem[e.off:end:end], commit, abort, nil
}

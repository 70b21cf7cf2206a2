package objstore

import (
	"context"
	"fmt"
	"sync"
)

// Subscription is a stream of the IDs of objects sealed in the store
// (created by its clients or fetched from other stores) after Subscribe
// returned. Its buffer holds SubscriptionBuffer IDs at the store and as
// many at the client: a subscriber that does not keep up is dropped, not
// waited for — its channel closes and Err says ErrLagged.
type Subscription struct {
	c     *Client
	reqID uint32
	ch    chan ID

	mu    sync.Mutex
	err   error
	ended bool
}

// Subscribe starts a Subscription.
func (c *Client) Subscribe(ctx context.Context) (*Subscription, error) {
	s := &Subscription{c: c, ch: make(chan ID, SubscriptionBuffer)}
	r := &request{typ: msgSubscribe}
	// The subscription must be known before its first notice can arrive,
	// so call registers it through the request ID it picks.
	b, err := c.subscribe(ctx, r, s)
	if err == nil && len(b) != 0 {
		err = fmt.Errorf("%w: %d trailing reply bytes", ErrProtocol, len(b))
	}
	if err != nil {
		c.mu.Lock()
		delete(c.subs, s.reqID)
		c.mu.Unlock()
		return nil, fmt.Errorf("objstore: subscribe: %w", err)
	}
	return s, nil
}

// subscribe is call for a Subscribe request: s is registered under the
// request's ID before the request is sent.
func (c *Client) subscribe(ctx context.Context, r *request, s *Subscription) ([]byte, error) {
	r.register = func(reqID uint32) {
		s.reqID = reqID
		c.subs[reqID] = s
	}
	return c.call(ctx, r)
}

// C is the stream of sealed IDs. It is closed when the subscription ends
// (Close, lag, disconnection); Err then says why.
func (s *Subscription) C() <-chan ID { return s.ch }

// Err is why the subscription ended (ErrLagged, ErrDisconnected,
// ErrClosed), or nil while it runs.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription.
func (s *Subscription) Close() error {
	s.c.mu.Lock()
	_, live := s.c.subs[s.reqID]
	delete(s.c.subs, s.reqID)
	s.c.mu.Unlock()
	s.end(ErrClosed)
	if live {
		if err := s.c.write(newFrame(nil, msgCancel, s.reqID).done()); err != nil {
			return fmt.Errorf("objstore: close subscription: %w", err)
		}
	}
	return nil
}

// end closes the stream with err (once).
func (s *Subscription) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.ch)
}

// deliver hands a notice to its subscription (on the reader goroutine):
// a full buffer drops the subscription, at the store too.
func (c *Client) deliver(h header, b []byte) {
	c.mu.Lock()
	s := c.subs[h.reqID]
	c.mu.Unlock()
	if s == nil {
		return // ended here already
	}
	p := payload{b: b}
	var id ID
	if h.typ == msgNotify {
		id = p.id()
	}
	if err := p.end(); err != nil {
		c.dropSub(s, fmt.Errorf("notice: %w", err))
		return
	}
	if h.typ == msgLagged {
		c.dropSub(s, ErrLagged)
		return
	}
	select {
	case s.ch <- id:
	default:
		c.dropSub(s, ErrLagged)
		go func() { _ = c.write(newFrame(nil, msgCancel, s.reqID).done()) }()
	}
}

func (c *Client) dropSub(s *Subscription, err error) {
	c.mu.Lock()
	delete(c.subs, s.reqID)
	c.mu.Unlock()
	s.end(err)
}

package tcp

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/nic"
)

// A link whose dialer set helloServes executes the requests its listener
// sends on it (shared.go): whoever holds the link's read token serves them
// as it reads, and writes their answers without waiting for the network.

// servingWindow is how long after serving a request a link's pollers keep
// reading it with nothing of their own outstanding: an answer to what
// they sent may come as a request.
const servingWindow = int64(time.Millisecond)

// serveRequest executes a request the peer sent on this link; the caller
// holds tok. The link's responder is made on the first one.
func (l *link) serveRequest(body []byte) error {
	if !l.dev.opts.share {
		return fmt.Errorf("%w: a request from %s, which this link did not offer to serve", ErrProtocol, l.address)
	}
	if err := decodeRequest(body, &l.req, &l.pbuf); err != nil {
		return err
	}
	if l.sess == nil {
		if l.peerAddr == "" {
			return fmt.Errorf("%w: a request on a link to %s, which did not say its address", ErrProtocol, l.address)
		}
		l.mu.Lock()
		dead := l.dead
		if !dead {
			l.peerID = l.dev.peers.Add(l.peerAddr)
			l.sess = l.dev.node.NewSession(l.peerID, l.peerAddr)
		}
		l.mu.Unlock()
		if dead {
			return errors.New("link closed")
		}
	}
	l.servedAt.Store(nanotime())
	l.sess.Serve(&l.req, l)
	l.req.Payload, l.pbuf[0] = nil, nil
	return nil
}

// Respond implements nic.Responder for the requests the peer sends on
// this link: the response is written after the frames at hand are
// handled (answer).
func (l *link) Respond(r *nic.Response) {
	if r.Kind == nic.RespDrop {
		return // a request from the wrong peer gets nothing
	}
	l.rout = appendResponse(l.rout, r)
}

// answer sends the responses (and PONGs) the reader made. The reader must
// not wait for the network: the peer may be waiting to write its own
// answers to this node before it reads any more. So it writes without
// blocking what the socket takes and leaves the rest to a Flush on
// another goroutine; it waits only while more than maxPending bytes are
// queued (a peer that reads none of them loses the connection to its own
// write deadline).
func (l *link) answer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.out) >= maxPending && !l.dead {
		l.cond.Wait()
	}
	if l.dead {
		l.rout = l.rout[:0]
		return
	}
	l.out = append(l.out, l.rout...)
	l.rout = l.rout[:0]
	if l.writing || l.dev.blocked(l.address) {
		return // the write in progress takes them, or the fault's end
	}
	n, err := l.raw.writeNB(l.out)
	if err != nil {
		go l.fail(err)
		return
	}
	l.out = l.out[:copy(l.out, l.out[n:])]
	if len(l.out) == 0 {
		l.queued = 0
		return
	}
	go l.Flush()
}

// closeShared releases what sharing holds when the link fails: its
// responder and peer number, and a served connection it was routed
// through (its peer is gone too).
func (l *link) closeShared() {
	l.mu.Lock()
	sess := l.sess // a reader may still use it: it is not taken away
	l.mu.Unlock()
	if sess != nil {
		sess.Close()
		l.dev.peers.Drop(l.peerID)
	}
	if s := l.via.Load(); s != nil {
		s.c.Close()
	}
}

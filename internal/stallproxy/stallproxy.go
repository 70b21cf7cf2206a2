// Package stallproxy is a test helper: a TCP proxy in front of a cm
// listener that forwards a dialer's connection request (REQ) and the
// listener's reply (REP) but swallows everything the dialer sends after
// the reply — its RTU — so that the listener's side of the exchange
// stalls until its handshake timeout, as with a dialer that never
// completes its handshake.
package stallproxy

import (
	"io"
	"net"
	"sync"
)

// Proxy is a running stalling proxy.
type Proxy struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	open  int // proxied exchanges whose listener end is still open
}

// Start listens on a free loopback port and proxies every connection to
// target ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.open++
			p.mu.Unlock()
			p.wg.Add(2)
			var replied sync.Once
			stalled := make(chan struct{})
			go func() { // dialer → listener, until the reply
				defer p.wg.Done()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					select {
					case <-stalled:
						if err != nil {
							return
						}
						continue // swallowed: the RTU and anything after
					default:
					}
					if n > 0 {
						s.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
			go func() { // listener → dialer
				defer p.wg.Done()
				buf := make([]byte, 4096)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						replied.Do(func() { close(stalled) })
						c.Write(buf[:n])
					}
					if err != nil {
						// The listener ended the exchange (its handshake
						// timed out, perhaps before it replied): the
						// dialer sees its connection end, as without
						// the proxy, instead of waiting for ever.
						c.Close()
						io.Copy(io.Discard, s)
						p.mu.Lock()
						p.open--
						p.mu.Unlock()
						return
					}
				}
			}()
		}
	}()
	return p, nil
}

// Addr is the address dialers use instead of the listener's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pending returns the number of proxied exchanges the listener has not
// closed its end of: stalled ones, waiting for an RTU that never comes.
func (p *Proxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// Close closes every proxied connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

package cm

import (
	"fmt"
	"net"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// Conn is one end of an established connection: a QP in RTS connected to
// the peer's QP, and what the peer sent during the exchange.
type Conn struct {
	qp       verbs.QP
	peerAddr string
	peerQPN  uint32
	peerData []byte
	sideAddr net.Addr

	closeOnce sync.Once
	closeErr  error
}

// QP returns the connected queue pair, in RTS. It belongs to the caller
// until Close.
func (c *Conn) QP() verbs.QP { return c.qp }

// PeerPrivateData returns the private data the peer sent (nil if none).
// The slice is the Conn's own copy; the caller may keep it.
func (c *Conn) PeerPrivateData() []byte { return c.peerData }

// PeerAddress returns the peer device's address (its verbs.Device.Address).
func (c *Conn) PeerAddress() string { return c.peerAddr }

// PeerQPN returns the number of the peer's QP.
func (c *Conn) PeerQPN() uint32 { return c.peerQPN }

// SideChannelAddr returns the TCP address of the peer's end of the
// exchange's side channel (for logs; the connection no longer uses it).
func (c *Conn) SideChannelAddr() net.Addr { return c.sideAddr }

// String describes the connection, e.g.
// "cm.Conn{qpn 3 → loop://f/server qpn 5}".
func (c *Conn) String() string {
	return fmt.Sprintf("cm.Conn{qpn %d → %s qpn %d}", c.qp.QPN(), c.peerAddr, c.peerQPN)
}

// Close destroys the QP; work requests still queued are discarded. The
// peer is not told: its requests to this QP complete with
// RETRY_EXC_ERR. Close is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = destroy(c.qp) })
	return c.closeErr
}

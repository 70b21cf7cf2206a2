package sock

import (
	"context"
)

// ControlPlane is a host's control plane as the library sees it: rdmakit
// sockd (package sock/sockd) implements it, in the role of the thesis' NTM.
// Without one (Config.Control nil) two processes find each other by name
// alone and every connection is accepted.
type ControlPlane interface {
	// Register announces a listener; the returned function withdraws it.
	Register(ctx context.Context, info ListenerInfo) (unregister func(), err error)
	// Admit decides whether the listener at addr accepts a connection from
	// the application peerApp. It returns the partition to put the
	// connection in (from 0 to partitions-1, or -1 for the library's
	// round-robin) or an error, whose text the dialer's ErrRefused carries.
	Admit(ctx context.Context, addr Addr, peerApp string, partitions int) (int, error)
	// Release tells the control plane that a connection it admitted ended.
	Release(addr Addr, peerApp string, partition int)
	// Resolve says whether the plain network address (network "tcp",
	// address "HOST:PORT") is served by an rdmakit endpoint, and at which
	// sock URI. Dialer.DialContext falls back to plain TCP when it is not.
	Resolve(ctx context.Context, network, address string) (uri string, ok bool, err error)
}

// ListenerInfo describes a listener to the control plane.
type ListenerInfo struct {
	Addr       Addr   // where it listens
	App        string // the application (Config.App)
	PID        int    // its process
	Partitions int    // rings per link
	RingSize   int    // bytes per ring
	MTU        int
}

package node

import (
	"context"
	"errors"
	"log/slog"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
)

// Transfer configures a node's cross-node side.
type Transfer struct {
	// Listen is the verbs device address peers fetch from by SEND/RECV
	// and READ (HOST:PORT); empty serves none.
	Listen string
	// TCPListen is the address peers fetch from by the TCP baselines;
	// empty serves none.
	TCPListen string
	// Peers are the nodes this node's fetches ask, in order.
	Peers []string
	// Protocol is how this node fetches: hybrid, sendrecv, read, tcp4k
	// or tcpbulk.
	Protocol string
	// Threshold is the hybrid protocol's switch from SEND/RECV to READ,
	// in bytes; 0 takes the transfer layer's default.
	Threshold int
}

// TransferStats are the transfer layer's counters.
type TransferStats struct {
	// Objects and Bytes count objects moved (served or fetched).
	Objects, Bytes int64 `json:",omitempty"`
	// CopiedBytes counts bytes copied in user space.
	CopiedBytes int64 `json:",omitempty"`
}

// ErrNoTransfer is returned when a node is asked to serve or fetch
// across nodes in a build without the transfer layer.
var ErrNoTransfer = errors.New("node: cross-node transfer is not available in this build")

type fetcherPart struct{}

func newFetcher(cfg Transfer, _ *slog.Logger) (*fetcherPart, error) {
	if len(cfg.Peers) > 0 {
		return nil, ErrNoTransfer
	}
	return &fetcherPart{}, nil
}

func (*fetcherPart) fetcher() object.Fetcher { return nil }
func (*fetcherPart) stats() TransferStats    { return TransferStats{} }
func (*fetcherPart) close()                  {}

type holderPart struct{}

func newHolder(_ context.Context, _ *objstore.Store, cfg Transfer, _ *slog.Logger) (*holderPart, error) {
	if cfg.Listen != "" || cfg.TCPListen != "" {
		return nil, ErrNoTransfer
	}
	return &holderPart{}, nil
}

func (*holderPart) verbsAddr() string    { return "" }
func (*holderPart) tcpAddr() string      { return "" }
func (*holderPart) stats() TransferStats { return TransferStats{} }
func (*holderPart) close()               {}
func addStats(a, b TransferStats) TransferStats {
	return TransferStats{Objects: a.Objects + b.Objects, Bytes: a.Bytes + b.Bytes, CopiedBytes: a.CopiedBytes + b.CopiedBytes}
}

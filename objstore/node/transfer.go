package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/objstore/transfer"
	_ "github.com/rdmakit/rdmakit/transport/tcp" // the default device between stores
	"github.com/rdmakit/rdmakit/verbs"
)

// DefaultDevice is the verbs device a node opens when Transfer.Device is
// empty: the tcp transport on a port of its own.
const DefaultDevice = "tcp://127.0.0.1:0"

// Transfer configures a node's cross-node side.
type Transfer struct {
	// Listen is the address (HOST:PORT) of the connection manager peers
	// connect their pairs through, for SEND/RECV and READ; empty serves
	// none.
	Listen string
	// Device is the verbs device URI pairs run over, serving and
	// fetching; empty means DefaultDevice.
	Device string
	// TCPListen is the address peers fetch from by the TCP baselines;
	// empty serves none.
	TCPListen string
	// Peers are the nodes this node's fetches ask, in order: their Listen
	// addresses for the verbs protocols, their TCPListen addresses for
	// tcp4k and tcpbulk.
	Peers []string
	// Protocol is how this node fetches: hybrid (the default), sendrecv,
	// read, tcp4k or tcpbulk.
	Protocol string
	// Threshold is the hybrid protocol's switch from SEND/RECV to READ,
	// in bytes; 0 takes transfer.DefaultThreshold.
	Threshold int
}

// TransferStats are the transfer layer's counters of a node: its holder
// side (Server) and its fetcher side (Fetcher).
type TransferStats struct {
	// Server is the holder side's counters (objects served to peers).
	Server transfer.Stats `json:"server"`
	// Fetcher is the fetching side's counters (objects pulled from
	// peers).
	Fetcher transfer.Stats `json:"fetcher"`
	// CopiedBytes is the bytes both sides copied in user space.
	CopiedBytes int64 `json:"copied_bytes"`
}

// transferPart is a node's transfer server, fetcher and the device they
// share; each part may be absent.
type transferPart struct {
	cfg     Transfer
	log     *slog.Logger
	proto   transfer.Protocol
	dev     verbs.Device
	server  *transfer.Server
	fetcher *transfer.Fetcher
}

// newTransfer opens the device (when a verbs part needs it) and makes the
// fetcher (when there are peers); serve starts the server.
func newTransfer(cfg Transfer, log *slog.Logger) (_ *transferPart, err error) {
	proto, err := transfer.ParseProtocol(cfg.Protocol)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	t := &transferPart{cfg: cfg, log: log, proto: proto}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if cfg.Listen != "" || (len(cfg.Peers) > 0 && proto.Verbs()) {
		uri := cfg.Device
		if uri == "" {
			uri = DefaultDevice
		}
		if t.dev, err = verbs.Open(uri); err != nil {
			return nil, fmt.Errorf("node: open %s: %w", uri, err)
		}
	}
	if len(cfg.Peers) > 0 {
		if t.fetcher, err = transfer.NewFetcher(t.config()); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	return t, nil
}

// config is the transfer layer's configuration of the node.
func (t *transferPart) config() transfer.Config {
	return transfer.Config{Protocol: t.proto, Threshold: t.cfg.Threshold, Peers: t.cfg.Peers, Device: t.dev, Logger: t.log}
}

// serve starts the server over st's Source when there is an address to
// listen on.
func (t *transferPart) serve(ctx context.Context, st *objstore.Store) error {
	if t.cfg.Listen == "" && t.cfg.TCPListen == "" {
		return nil
	}
	var err error
	if t.server, err = transfer.NewServer(ctx, st.Source(), t.dev, t.cfg.Listen, t.cfg.TCPListen, t.config()); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

// objectFetcher is the store's Fetcher: nil without peers.
func (t *transferPart) objectFetcher() object.Fetcher {
	if t.fetcher == nil {
		return nil
	}
	return t.fetcher
}

func (t *transferPart) verbsAddr() string {
	if t.server == nil {
		return ""
	}
	return t.server.VerbsAddr()
}

func (t *transferPart) tcpAddr() string {
	if t.server == nil {
		return ""
	}
	return t.server.TCPAddr()
}

func (t *transferPart) stats() TransferStats {
	var s TransferStats
	if t.server != nil {
		s.Server = t.server.Stats()
	}
	if t.fetcher != nil {
		s.Fetcher = t.fetcher.Stats()
	}
	s.CopiedBytes = s.Server.CopiedBytes + s.Fetcher.CopiedBytes
	return s
}

// close stops the server and the fetcher, then closes the device.
func (t *transferPart) close() {
	if t.server != nil {
		_ = t.server.Close()
	}
	if t.fetcher != nil {
		_ = t.fetcher.Close()
	}
	if t.dev != nil {
		_ = t.dev.Close()
	}
}

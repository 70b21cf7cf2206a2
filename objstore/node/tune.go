package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/objstore/transfer"
	"github.com/rdmakit/rdmakit/verbs"
)

// TuneConfig configures Tune.
type TuneConfig struct {
	// Peer is a holder node's Listen address; empty starts a holder in
	// this process.
	Peer string
	// PeerSocket is that holder's local socket, through which Tune
	// creates the objects it fetches (required with Peer).
	PeerSocket string
	// Device is the verbs device URI of the fetching side (and of the
	// holder Tune starts); empty means DefaultDevice.
	Device string
	// Sizes are the object sizes measured; empty means DefaultTuneSizes.
	Sizes []int
	// Runs is the number of timed fetches per size and protocol (their
	// median is reported); 0 means 20.
	Runs int
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultTuneSizes are 1 KiB to 1 MiB in powers of 2: around the
// thesis' crossover (~16 KiB) on either side.
var DefaultTuneSizes = []int{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20}

// Tune measures fetches by SEND/RECV only and by READ only at each size
// from a holder (transfer.Tune) and returns the table and the threshold
// to configure the hybrid with. The objects are created at the holder
// and deleted afterwards; the fetching side is a store of Tune's own, so
// no store is changed.
func Tune(ctx context.Context, cfg TuneConfig) (transfer.TuneResult, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Device == "" {
		cfg.Device = DefaultDevice
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = DefaultTuneSizes
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 20
	}
	total := int64(0)
	for _, s := range cfg.Sizes {
		if s <= 0 {
			return transfer.TuneResult{}, fmt.Errorf("node: tune: %w: size %d", object.ErrBadSize, s)
		}
		total += int64(s)
	}
	mem := total + 16<<20
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	peer, socket := cfg.Peer, cfg.PeerSocket
	if peer == "" {
		h, err := startLocalHolder(ctx, cfg, mem)
		if err != nil {
			return transfer.TuneResult{}, err
		}
		defer h.close()
		peer, socket = h.tr.verbsAddr(), h.st.Addr()
	} else if socket == "" {
		return transfer.TuneResult{}, errors.New("node: tune: a holder given by its address needs its socket too")
	}
	objs, cleanup, err := tuneObjects(ctx, socket, cfg.Sizes)
	if err != nil {
		return transfer.TuneResult{}, err
	}
	defer cleanup()

	sink, err := objstore.NewStore(objstore.Config{Mem: mem, Logger: cfg.Logger})
	if err != nil {
		return transfer.TuneResult{}, fmt.Errorf("node: tune: %w", err)
	}
	defer sink.Close()
	dev, err := verbs.Open(cfg.Device)
	if err != nil {
		return transfer.TuneResult{}, fmt.Errorf("node: tune: open %s: %w", cfg.Device, err)
	}
	defer dev.Close()
	f, err := transfer.NewFetcher(transfer.Config{Protocol: transfer.SendRecv, Peers: []string{peer}, Device: dev, Logger: cfg.Logger})
	if err != nil {
		return transfer.TuneResult{}, fmt.Errorf("node: tune: %w", err)
	}
	defer f.Close()
	return transfer.Tune(ctx, f, peer, sink.Sink(), objs, cfg.Runs)
}

// localHolder is a store serving its objects to peers, in this process.
type localHolder struct {
	st   *objstore.Store
	tr   *transferPart
	done chan error
}

func startLocalHolder(ctx context.Context, cfg TuneConfig, mem int64) (*localHolder, error) {
	tr, err := newTransfer(Transfer{Listen: "127.0.0.1:0", Device: cfg.Device}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	st, err := objstore.NewStore(objstore.Config{Mem: mem, Logger: cfg.Logger})
	if err != nil {
		tr.close()
		return nil, fmt.Errorf("node: tune: %w", err)
	}
	h := &localHolder{st: st, tr: tr, done: make(chan error, 1)}
	if err := tr.serve(ctx, st); err != nil {
		tr.close()
		st.Close()
		return nil, err
	}
	go func() { h.done <- st.Serve(ctx) }()
	return h, nil
}

func (h *localHolder) close() {
	h.tr.close()
	h.st.Close()
	<-h.done
}

// tuneObjects creates one object of each size at the store on socket and
// returns them and a function deleting them.
func tuneObjects(ctx context.Context, socket string, sizes []int) ([]transfer.TuneObject, func(), error) {
	c, err := objstore.Connect(ctx, socket)
	if err != nil {
		return nil, nil, fmt.Errorf("node: tune: %w", err)
	}
	var objs []transfer.TuneObject
	cleanup := func() {
		for _, o := range objs {
			_ = c.Delete(context.WithoutCancel(ctx), o.ID)
		}
		c.Close()
	}
	for _, size := range sizes {
		id := object.NewID()
		dst, err := c.Create(ctx, id, size, nil)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("node: tune: %w", err)
		}
		for i := range dst {
			dst[i] = byte(i)
		}
		err = c.Seal(ctx, id)
		if err == nil {
			err = c.Release(ctx, id)
		}
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("node: tune: %w", err)
		}
		objs = append(objs, transfer.TuneObject{ID: id, Size: size})
	}
	return objs, cleanup, nil
}

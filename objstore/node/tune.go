package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/objstore/transfer"
)

// TuneConfig configures Tune.
type TuneConfig struct {
	// Peer is a holder node's Listen address; empty starts a holder in
	// this process.
	Peer string
	// PeerSocket is that holder's local socket, through which Tune
	// creates the objects it fetches (required with Peer).
	PeerSocket string
	// Device is the verbs device URI of the fetching side and, on the
	// same transport, of the holder Tune starts (shm://NAME-holder for
	// shm://NAME); empty means DefaultDevice.
	Device string
	// Register is the registration of both sides (Transfer.Register);
	// empty picks by the device, as a node does.
	Register string
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

	// The fetching side: a store of its own, in the device's memory when
	// the registration is the arena's.
	tr, err := newTransfer(Transfer{Device: cfg.Device, Peers: []string{peer}, Protocol: "sendrecv", Register: cfg.Register}, mem, cfg.Logger)
	if err != nil {
		return transfer.TuneResult{}, err
	}
	defer tr.close()
	// Its memory stays resident between fetches (as a serving store's
	// does up to KeepResident): page faults of a fresh destination would
	// be measured as part of each fetch otherwise.
	sink, err := objstore.NewStore(objstore.Config{Mem: mem, Memory: tr.memory(), KeepResident: mem, Logger: cfg.Logger})
	if err != nil {
		return transfer.TuneResult{}, fmt.Errorf("node: tune: %w", err)
	}
	defer sink.Close()
	defer tr.stop()
	return transfer.Tune(ctx, tr.fetcher, peer, sink.Sink(), objs, cfg.Runs)
}

// localHolder is a store serving its objects to peers, in this process.
type localHolder struct {
	st   *objstore.Store
	tr   *transferPart
	done chan error
}

func startLocalHolder(ctx context.Context, cfg TuneConfig, mem int64) (*localHolder, error) {
	tr, err := newTransfer(Transfer{Listen: "127.0.0.1:0", Device: holderDevice(cfg.Device), Register: cfg.Register}, mem, cfg.Logger)
	if err != nil {
		return nil, err
	}
	st, err := objstore.NewStore(objstore.Config{Mem: mem, Memory: tr.memory(), Logger: cfg.Logger})
	if err != nil {
		tr.close()
		return nil, fmt.Errorf("node: tune: %w", err)
	}
	h := &localHolder{st: st, tr: tr, done: make(chan error, 1)}
	if err := tr.serve(ctx, st); err != nil {
		st.Close()
		tr.close()
		return nil, err
	}
	go func() { h.done <- st.Serve(ctx) }()
	return h, nil
}

func (h *localHolder) close() {
	h.tr.stop()
	h.st.Close()
	<-h.done
	h.tr.close()
}

// tuneObjects creates one object of each size at the store on socket and
// returns them and a function deleting them.
func tuneObjects(ctx context.Context, socket string, sizes []int) ([]transfer.TuneObject, func(), error) {
	c, err := objstore.Connect(ctx, socket)
	if err != nil {
		return nil, nil, fmt.Errorf("node: tune: %w", err)
	}
	var objs []transfer.TuneObject
	var made []object.ID // created, sealed or not
	cleanup := func() { removeTuneObjects(context.WithoutCancel(ctx), c, socket, made) }
	for _, size := range sizes {
		id := object.NewID()
		dst, err := c.Create(ctx, id, size, nil)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("node: tune: %w", err)
		}
		made = append(made, id)
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

// tuneCleanup bounds how long removeTuneObjects waits for the holder to
// let go of an object (a READ of a cancelled tune keeps it pinned until
// its pair closes).
const tuneCleanup = 10 * time.Second

// removeTuneObjects deletes the objects Tune made at the holder, whatever
// state a cancellation left them in: closing c, the client that made
// them, aborts those not sealed and drops its references (a Seal or a
// Release cut short by the cancellation may have left one); a second
// client then deletes the rest, retrying while the holder still pins
// one for a transfer that is ending.
func removeTuneObjects(ctx context.Context, c *objstore.Client, socket string, ids []object.ID) {
	c.Close()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, tuneCleanup)
	defer cancel()
	d, err := objstore.Connect(ctx, socket)
	if err != nil {
		return
	}
	defer d.Close()
	for _, id := range ids {
		for {
			err := d.Delete(ctx, id)
			if err == nil || errors.Is(err, object.ErrNotFound) || !errors.Is(err, object.ErrInUse) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// holderDevice is the device URI of the holder Tune starts, on the same
// transport as the fetching side's uri: a device of its own, so an shm
// name gets a suffix (two shm devices cannot share a name); other URIs
// stay (tcp's port 0 is a port of its own).
func holderDevice(uri string) string {
	if name, ok := strings.CutPrefix(uri, "shm://"); ok {
		return "shm://" + name + "-holder"
	}
	return uri
}

package node

import (
	"errors"
	"fmt"
	"os"

	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/transfer"
	"github.com/rdmakit/rdmakit/verbs"
)

// Values of Transfer.Register: how a node makes its objects READable by
// peers.
const (
	// RegisterObject registers each object in place for its READ (the
	// holder) or for the READ into it (the fetcher), and deregisters it at
	// FIN: an rkey reaches one object through one pair. It needs a device
	// that can register memory it did not allocate (verbs.MemRegistrar).
	RegisterObject = "object"
	// RegisterArena allocates the store's whole arena as one memory
	// region of the device (AccessLocalWrite|AccessRemoteRead) and serves
	// and fetches READs through it, with no registration per transfer:
	// a connected peer can READ any object of the arena
	// (objstore/transfer's doc, "Arena registration"). It needs a device
	// whose regions are memfds (shm://, tcp://…?memfd=1), which the
	// store's local clients map.
	RegisterArena = "arena"
)

// ErrNoArena is returned when the arena cannot be a memory region of the
// node's device: its regions are not memfds the store's clients could
// map.
var ErrNoArena = errors.New("node: the device's memory regions are not memfds; the arena cannot be one")

// registerMode is the registration a node with device dev uses: mode
// itself, or for "" object where dev can register objects in place and
// arena otherwise.
func registerMode(mode string, dev verbs.Device) (string, error) {
	switch mode {
	case RegisterObject, RegisterArena:
		return mode, nil
	case "":
	default:
		return "", fmt.Errorf("node: %w: registration %q (want %s or %s)", verbs.ErrInvalidArg, mode, RegisterObject, RegisterArena)
	}
	ok, err := canRegMR(dev)
	if err != nil {
		return "", err
	}
	if ok {
		return RegisterObject, nil
	}
	return RegisterArena, nil
}

// canRegMR reports whether dev registers memory it did not allocate: it
// registers one page of the Go heap and deregisters it at once.
func canRegMR(dev verbs.Device) (bool, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return false, fmt.Errorf("node: probe the device: %w", err)
	}
	defer pd.Dealloc()
	reg, ok := pd.(verbs.MemRegistrar)
	if !ok {
		return false, nil
	}
	mr, err := reg.RegMR(make([]byte, os.Getpagesize()), verbs.AccessLocalWrite)
	if errors.Is(err, verbs.ErrNotSupported) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node: probe the device's RegMR: %w", err)
	}
	return true, mr.Deregister()
}

// arena is a store's memory allocated as one memory region of the
// node's device: the store runs in it (objstore.Config.Memory) and the
// transfer layer READs through it (transfer.Config.Arena).
type arena struct {
	pd verbs.PD
	mr verbs.MR
	fd int
}

// fdMR is a region backed by a memfd (nic.MR).
type fdMR interface{ FD() int }

// allocArena allocates mem bytes on dev as one region.
func allocArena(dev verbs.Device, mem int64) (_ *arena, err error) {
	if mem <= 0 || mem > int64(^uint(0)>>1) {
		return nil, fmt.Errorf("node: %w: arena of %d bytes", objstore.ErrBadSize, mem)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("node: arena PD: %w", err)
	}
	defer func() {
		if err != nil {
			_ = pd.Dealloc()
		}
	}()
	mr, err := pd.AllocMR(int(mem), verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	if err != nil {
		return nil, fmt.Errorf("node: arena of %d bytes: %w", mem, err)
	}
	fd := -1
	if m, ok := mr.(fdMR); ok {
		fd = m.FD()
	}
	if fd < 0 {
		_ = mr.Deregister()
		return nil, fmt.Errorf("%w (%s; shm:// or tcp://…?memfd=1 have them)", ErrNoArena, dev.Address())
	}
	return &arena{pd: pd, mr: mr, fd: fd}, nil
}

// memory is the store's view of the arena.
func (a *arena) memory() *objstore.Memory {
	return &objstore.Memory{Bytes: a.mr.Bytes(), FD: a.fd}
}

// configure has the transfer layer READ objects in the arena by its keys
// (transfer.Config.Arena): no registration per transfer.
func (a *arena) configure(c *transfer.Config) {
	c.Arena, c.ArenaPD = a.mr, a.pd
}

// close deregisters the arena (unmapping it and closing its memfd): after
// the store and every pair using it are closed.
func (a *arena) close() error {
	return errors.Join(a.mr.Deregister(), a.pd.Dealloc())
}

package tcp

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// faults injects network faults into a device, for tests of distributed
// protocols across processes: a paused device neither serves nor sends
// nor reads answers; a cut link to a peer does the same for that peer
// only. Requests caught by a fault wait, and fail with RETRY_EXC_ERR once
// they outlast their QP's retry budget, as on loop.
type faults struct {
	any    atomic.Bool // a fault is active: the fast path checks only this
	mu     sync.Mutex
	cond   sync.Cond
	paused bool
	cut    map[string]bool // peer device addresses
}

// blocked reports whether traffic with peer is held now.
func (d *device) blocked(peer string) bool {
	if !d.faults.any.Load() {
		return false
	}
	f := &d.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused || f.cut[peer]
}

// waitOpen waits until traffic with peer may flow or the device closes.
func (d *device) waitOpen(peer string) {
	if !d.faults.any.Load() {
		return
	}
	f := &d.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	for (f.paused || f.cut[peer]) && !d.closed.Load() {
		f.cond.Wait()
	}
}

// setFault changes the fault state and, when traffic may flow again,
// flushes what the links held back.
func (d *device) setFault(change func(f *faults)) {
	f := &d.faults
	f.mu.Lock()
	if f.cut == nil {
		f.cut = map[string]bool{}
		f.cond.L = &f.mu
	}
	change(f)
	f.any.Store(f.paused || len(f.cut) > 0)
	f.cond.Broadcast()
	f.mu.Unlock()
	for _, l := range d.links.Snapshot() {
		go l.Flush()
	}
}

// releaseFaults wakes every goroutine held by a fault; the device is
// closing.
func (d *device) releaseFaults() {
	f := &d.faults
	f.mu.Lock()
	if f.cond.L != nil {
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

func asDevice(dev verbs.Device) (*device, error) {
	d, ok := dev.(*device)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a tcp device", verbs.ErrInvalidArg, dev)
	}
	return d, nil
}

// Pause freezes a tcp device's network: its soft NIC stops serving, and
// its own requests and the answers to them stop moving, until Resume.
// Requests that outlast their QP's retry budget fail with RETRY_EXC_ERR.
func Pause(dev verbs.Device) error {
	d, err := asDevice(dev)
	if err != nil {
		return err
	}
	d.setFault(func(f *faults) { f.paused = true })
	return nil
}

// Resume ends a Pause.
func Resume(dev verbs.Device) error {
	d, err := asDevice(dev)
	if err != nil {
		return err
	}
	d.setFault(func(f *faults) { f.paused = false })
	return nil
}

// Partition cuts dev's traffic with the device at peer (its address), in
// both directions as far as dev is concerned: call it on both devices for
// a symmetric partition.
func Partition(dev verbs.Device, peer string) error {
	d, err := asDevice(dev)
	if err != nil {
		return err
	}
	d.setFault(func(f *faults) { f.cut[peer] = true })
	return nil
}

// Heal ends a Partition.
func Heal(dev verbs.Device, peer string) error {
	d, err := asDevice(dev)
	if err != nil {
		return err
	}
	d.setFault(func(f *faults) { delete(f.cut, peer) })
	return nil
}

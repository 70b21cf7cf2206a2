package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// The two copies of a block a replica holds, which recovery copies
// separately.
const (
	designPRISM = iota // the PRISM-RS slot and its ⟨tag | data⟩ buffer
	designRPC          // ABD over RPC's store (MethodRead, MethodWrite)
	designs
)

// donor is a recovering replica's connection to another replica, a
// member, that it copies blocks from: PRISM-RS buffers by one-sided
// indirect READs through the donor's slots (the donor's NIC, as a
// PRISM-RS read's phase 1), the RPC store by MethodRead (its CPU).
type donor struct {
	addr string
	info Info
	conn *cm.Conn
	cq   verbs.CQ
	rpc  *rpc.Client
	mr   verbs.MR // window × designs buffers of BufHead+BlockSize bytes
	tag  verbs.Tag
	wcs  chan verbs.WC
	wrs  []verbs.SendWR
	size int // BufHead + BlockSize
	once sync.Once
}

// reachDonors connects to the others and keeps those that answer as
// members of one volume whose replicas are jc.Replicas; it fails unless
// at least need do.
func (r *Replica) reachDonors(ctx context.Context, jc JoinConfig, others []string, need int) ([]*donor, error) {
	ds := make([]*donor, len(others))
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, addr := range others {
		wg.Go(func() { ds[i], errs[i] = r.dialDonor(ctx, jc, addr) })
	}
	wg.Wait()
	// Keep the largest group that agrees on the layout.
	var best []*donor
	for _, d := range ds {
		if d == nil {
			continue
		}
		var group []*donor
		for _, e := range ds {
			if e != nil && e.info.Layout.Equal(d.info.Layout) {
				group = append(group, e)
			}
		}
		if len(group) > len(best) {
			best = group
		}
	}
	for _, d := range ds {
		if d != nil && !containsDonor(best, d) {
			d.close()
		}
	}
	if len(best) < need {
		for _, d := range best {
			d.close()
		}
		return nil, fmt.Errorf("%w: %d of the other %d replicas answer as members of one volume, %d needed: %w",
			blockstore.ErrNoQuorum, len(best), len(others), need, errors.Join(errs...))
	}
	return best, nil
}

func containsDonor(ds []*donor, d *donor) bool {
	for _, e := range ds {
		if e == d {
			return true
		}
	}
	return false
}

// dialDonor connects to the replica at addr, asks for its volume (it
// must be a member of one whose replicas are jc.Replicas), and prepares
// the connection for copying jc.Window blocks at a time.
func (r *Replica) dialDonor(ctx context.Context, jc JoinConfig, addr string) (*donor, error) {
	ctx, cancel := context.WithTimeout(ctx, jc.DialTimeout)
	defer cancel()
	d, err := r.dialPeer(ctx, jc, addr, MaxInfo+rpc.Header)
	if err != nil {
		return nil, err
	}
	resp := make([]byte, MaxInfo)
	n, err := d.rpc.Call(ctx, MethodInfo, nil, resp)
	if err == nil {
		d.info, err = UnmarshalInfo(resp[:n])
	}
	d.close() // the data connection's messages carry blocks
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", addr, MapErr(err))
	}
	info := d.info
	if !sameSet(info.Layout.Replicas, jc.Replicas) {
		return nil, fmt.Errorf("%w: replica %s holds a volume of replicas %v", blockstore.ErrNoVolume, addr, info.Layout.Replicas)
	}
	size := BufHead + info.Layout.BlockSize
	if d, err = r.dialPeer(ctx, jc, addr, max(MaxMessage(info.Layout.BlockSize), MaxInfo+rpc.Header)); err != nil {
		return nil, err
	}
	d.info, d.size = info, size
	if err := d.prepare(r.pd, jc.Window); err != nil {
		d.close()
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	return d, nil
}

// dialPeer opens a connection to the replica at addr with an rpc client
// of messages up to msg bytes.
func (r *Replica) dialPeer(ctx context.Context, jc JoinConfig, addr string, msg int) (*donor, error) {
	cq, err := r.dev.CreateCQ(4*jc.Window + 16)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	conn, err := cm.Dial(ctx, r.dev, addr, DialOptions(r.pd, cq, jc.Token, 0))
	if err != nil {
		cq.Destroy()
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	rc, err := rpc.NewClient(r.pd, conn.QP(), cq, rpc.ClientConfig{MaxMessage: msg, Slots: min(jc.Window, r.cfg.Recvs), Poll: verbs.PollEvent})
	if err != nil {
		conn.Close()
		cq.Destroy()
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	return &donor{addr: addr, conn: conn, cq: cq, rpc: rc}, nil
}

// sameSet reports whether a and b name the same replicas.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// prepare registers the buffers the donor's answers land in and the
// route of the READs' completions.
func (d *donor) prepare(pd verbs.PD, window int) error {
	mr, err := pd.AllocMR(window*designs*d.size, verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	d.wcs = make(chan verbs.WC, window)
	tag, err := d.rpc.Router().Register(func(wc *verbs.WC) error {
		d.wcs <- *wc
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("replica %s: %v: %w", d.addr, wc.Opcode, wc.Status.Err())
		}
		return nil
	})
	if err != nil {
		mr.Deregister()
		return err
	}
	d.mr, d.tag, d.wrs = mr, tag, make([]verbs.SendWR, window)
	return nil
}

// buf is where block j of a batch's answer for design lands.
func (d *donor) buf(design, j int) []byte {
	off := (j*designs + design) * d.size
	return d.mr.Bytes()[off : off+d.size]
}

// answer is the ⟨tag, data⟩ the donor gave for block j of the last
// batch, for design.
func (d *donor) answer(design, j int) (Tag, []byte) {
	b := d.buf(design, j)
	return Tag(binary.LittleEndian.Uint64(b)), b[BufHead:]
}

// fetch reads blocks first to first+k-1 of both designs from the donor:
// k indirect READs through its slots in one post list, and k MethodRead
// calls, all in flight at once.
func (d *donor) fetch(ctx context.Context, first uint64, k int) error {
	for j := range k {
		b := d.buf(designPRISM, j)
		sge := verbs.SGE{Addr: d.mr.Addr() + uint64(j*designs*d.size), Length: uint32(len(b)), LKey: d.mr.LKey()}
		prism.IndirectRead(d.wrs[j:j+1], d.tag.ID(uint64(j)), sge, d.info.RKey, d.info.SlotAddr(first+uint64(j)), false)
	}
	if err := d.conn.QP().PostSend(d.wrs[:k]); err != nil {
		return fmt.Errorf("replica %s: %w", d.addr, err)
	}
	errs := make([]error, k)
	var wg sync.WaitGroup
	for j := range k {
		wg.Go(func() {
			req := binary.LittleEndian.AppendUint64(make([]byte, 0, 8), first+uint64(j))
			n, err := d.rpc.Call(ctx, MethodRead, req, d.buf(designRPC, j))
			switch {
			case err != nil:
				errs[j] = fmt.Errorf("replica %s: %w", d.addr, MapErr(err))
			case n != d.size:
				errs[j] = fmt.Errorf("%w: replica %s answered %d bytes for a %d-byte block", blockstore.ErrProtocol, d.addr, n, d.size-BufHead)
			}
		})
	}
	var err error
	for got := 0; got < k && err == nil; got++ {
		select {
		case wc := <-d.wcs:
			if wc.Status != verbs.StatusSuccess {
				err = fmt.Errorf("replica %s: %v: %w", d.addr, wc.Opcode, wc.Status.Err())
			}
		case <-d.rpc.Done():
			err = fmt.Errorf("replica %s: connection lost: %w", d.addr, d.rpc.Err())
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		d.rpc.Close() // the calls in flight fail
	}
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

// close closes the connection, then releases the buffers (the QP is
// gone: nothing lands in them any more).
func (d *donor) close() {
	d.once.Do(func() {
		d.rpc.Close()
		d.conn.Close()
		if d.mr != nil {
			d.rpc.Router().Unregister(d.tag)
			d.mr.Deregister()
		}
		d.cq.Destroy()
	})
}

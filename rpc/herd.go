package rpc

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

// HERD-style calls (Kalia et al., "Using RDMA efficiently for key-value
// services"): the client WRITEs a request into its slot of a request
// region on the server, the server polls that region, and answers with a
// SEND. A request costs the server no receive and no completion, only a
// memory poll.
//
// A connection turns HERD on with an open call over the SEND path
// (method MethodHerdOpen, payload u32 slots | u32 message size); the
// answer is u64 region address | u32 rkey | u32 slot stride. Slot i of
// the region starts at i*stride and ends with a word, written by its own
// 8-byte WRITE after the message (WRs of a QP execute in order):
//
//	u32 message length | u32 request counter (1, 2, 3, ... per slot)
//
// The server takes a slot's request when the counter differs from the
// last one it took, and only once the SEND answering that slot's previous
// request has completed.

// MethodHerdOpen is reserved: the client's call that sets up HERD
// requests on a connection.
const MethodHerdOpen = 0xffff

// MaxHerdSlots bounds the slots of one connection's request region.
const MaxHerdSlots = 4096

// herdStride is the distance between slots for messages of size bytes.
func herdStride(size int) int { return (size+7)&^7 + 8 }

// herdRegion is the server side of a connection's HERD requests.
type herdRegion struct {
	req    verbs.MR // request region, remote write
	resp   verbs.MR // one response buffer per slot
	slots  int
	size   int
	stride int
	last   []uint32
	busy   []bool
	sgl    []verbs.SGE
}

// openHerd serves the open call: it registers the request region and
// writes the answer into out (after the header), returning its length.
func (s *Server) openHerd(pd verbs.PD, req, out []byte) (*herdRegion, int, error) {
	if len(req) != 8 {
		return nil, 0, fmt.Errorf("%w: open call of %d bytes", verbs.ErrInvalidArg, len(req))
	}
	slots, size := int(binary.LittleEndian.Uint32(req)), int(binary.LittleEndian.Uint32(req[4:]))
	if slots < 1 || slots > MaxHerdSlots {
		return nil, 0, fmt.Errorf("%w: %d HERD slots (1 to %d)", verbs.ErrInvalidArg, slots, MaxHerdSlots)
	}
	if size < MinMessage || size > s.cfg.MaxMessage {
		return nil, 0, fmt.Errorf("%w: %d-byte messages (the server takes %d to %d)", ErrTooLarge, size, MinMessage, s.cfg.MaxMessage)
	}
	stride := herdStride(size)
	reqMR, err := pd.AllocMR(slots*stride, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		return nil, 0, err
	}
	respMR, err := pd.AllocMR(slots*size, verbs.AccessLocalWrite)
	if err != nil {
		reqMR.Deregister()
		return nil, 0, err
	}
	h := &herdRegion{req: reqMR, resp: respMR, slots: slots, size: size, stride: stride,
		last: make([]uint32, slots), busy: make([]bool, slots), sgl: make([]verbs.SGE, slots)}
	binary.LittleEndian.PutUint64(out, reqMR.Addr())
	binary.LittleEndian.PutUint32(out[8:], reqMR.RKey())
	binary.LittleEndian.PutUint32(out[12:], uint32(stride))
	return h, 16, nil
}

func (h *herdRegion) close() {
	h.req.Deregister()
	h.resp.Deregister()
}

// scan takes every new request of the region, handles it and appends its
// answer to sends, tagged with tag, returning how many it took
// (server-side batching: the caller posts them all as one list). It fails with verbs.ErrClosed once
// the regions are gone (the device was closed under the server).
func (h *herdRegion) scan(s *Server, sends []verbs.SendWR, tag verbs.Tag) ([]verbs.SendWR, int, error) {
	buf, out := h.req.Bytes(), h.resp.Bytes()
	if len(buf) < h.slots*h.stride || len(out) < h.slots*h.size {
		return sends, 0, fmt.Errorf("rpc: HERD request region: %w", verbs.ErrClosed)
	}
	taken := 0
	for i := 0; i < h.slots; i++ {
		if h.busy[i] {
			continue
		}
		end := (i+1)*h.stride - 8
		w := atomic.LoadUint64((*uint64)(unsafe.Pointer(&buf[end])))
		ctr := uint32(w >> 32)
		if ctr == h.last[i] {
			continue
		}
		h.last[i] = ctr
		taken++
		ln := int(uint32(w))
		if ln < Header || ln > h.size {
			continue // malformed: dropped, as a SEND request would be
		}
		o := out[i*h.size : (i+1)*h.size]
		m := s.handle(buf[i*h.stride:i*h.stride+ln], o[:h.size])
		if m == 0 {
			continue
		}
		h.busy[i] = true
		h.sgl[i] = verbs.SGE{Addr: h.resp.Addr() + uint64(i*h.size), Length: uint32(m), LKey: h.resp.LKey()}
		sends = append(sends, verbs.SendWR{ID: tag.ID(uint64(i)), Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: h.sgl[i : i+1]})
	}
	return sends, taken, nil
}

// idler paces a loop that polls memory: it spins, then yields, then
// sleeps for doubling times up to a bound, so an idle poller costs
// little CPU and never starves another on a small machine.
type idler struct {
	n     int
	timer *time.Timer
}

const (
	idleSpin  = 16
	idleYield = 128
	idleMin   = 2 * time.Microsecond
	idleMax   = 200 * time.Microsecond
)

// reset notes that the loop found work.
func (d *idler) reset() { d.n = 0 }

// wait paces one idle pass; it returns ctx's error once ctx ends.
func (d *idler) wait(ctx context.Context) error {
	d.n++
	switch {
	case d.n < idleSpin:
		return nil
	case d.n < idleYield:
		runtime.Gosched()
		if d.n&63 == 0 {
			return ctx.Err()
		}
		return nil
	}
	sleep := idleMin << min(d.n-idleYield, 7)
	if sleep > idleMax {
		sleep = idleMax
	}
	if d.timer == nil {
		d.timer = time.NewTimer(sleep)
	} else {
		d.timer.Reset(sleep)
	}
	select {
	case <-d.timer.C:
		return nil
	case <-ctx.Done():
		d.timer.Stop()
		return ctx.Err()
	}
}

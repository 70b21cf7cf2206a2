package memnode

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// regions is the memory node's own Service: Config.Memory in
// Config.Regions regions, whose descriptors every client receives, and
// receives (echoes) for its SENDs.
type regions struct {
	cfg     *Config
	dev     verbs.Device
	pd      verbs.PD
	mrs     []verbs.MR
	descs   []cm.MRDesc
	private []byte // the descriptors, sent to every client
}

// newRegions registers the regions and checks the per-client queues
// against the device's limits.
func newRegions(cfg *Config, dev verbs.Device, pd verbs.PD) (_ *regions, err error) {
	a := dev.Attr()
	// A client's QP holds an echo per receive plus the probe; its CQ
	// every receive and echo at once.
	if cfg.Recv+1 > a.MaxQPWR || cqDepth(cfg.Recv) > a.MaxCQE {
		return nil, &ConfigError{"Recv", cfg.Recv, fmt.Sprintf("want 1..%d (the device's %s queues hold %d work requests and %d completions)",
			min(a.MaxQPWR-1, (a.MaxCQE-16)/2), a.Transport, a.MaxQPWR, a.MaxCQE)}
	}
	if bufs := int64(recvSlots(cfg)) * int64(cfg.RecvSize); uint64(bufs) > a.MaxMRSize {
		return nil, &ConfigError{"RecvSize", cfg.RecvSize, fmt.Sprintf("%d receives of it (echo) exceed the device's largest region (%d B)", cfg.Recv, a.MaxMRSize)}
	}
	r := &regions{cfg: cfg, dev: dev, pd: pd}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	size := cfg.Memory / int64(cfg.Regions)
	for range cfg.Regions {
		mr, err := pd.AllocMR(int(size), verbs.AccessLocalWrite|cfg.Access)
		if err != nil {
			return nil, fmt.Errorf("memnode: register a region of %d B: %w", size, err)
		}
		r.mrs = append(r.mrs, mr)
		r.descs = append(r.descs, cm.DescOf(mr))
	}
	r.private = cm.EncodeDescs(r.descs)
	return r, nil
}

// cqDepth is the CQ depth of a client with recv receives.
func cqDepth(recv int) int { return 2*recv + 16 }

// recvSlots is the receive buffers of a client: one per receive with
// echo (it is the echo's payload until the echo completes), else one
// shared sink.
func recvSlots(cfg *Config) int {
	if cfg.Echo {
		return cfg.Recv
	}
	return 1
}

// Name is empty: the memory node's clients send the bare token.
func (r *regions) Name() string { return "" }

// Admit refuses clients that ask for a named service.
func (r *regions) Admit(service string) error {
	if service != "" {
		return fmt.Errorf("this is a memory node, not a %q server", service)
	}
	return nil
}

// Describe adds the regions and receives to info.
func (r *regions) Describe(info *Info) {
	c := r.cfg
	info.Access, info.Memory, info.Recv, info.RecvSize, info.Echo = AccessString(c.Access), c.Memory, c.Recv, c.RecvSize, c.Echo
	for _, d := range r.descs {
		info.Regions = append(info.Regions, RegionOf(d))
	}
}

// Close deregisters the regions.
func (r *regions) Close() error {
	var errs []error
	for _, mr := range r.mrs {
		errs = append(errs, mr.Deregister())
	}
	r.mrs = nil
	return errors.Join(errs...)
}

// Open creates a client's SRQ, CQ and receive buffers and posts the
// receives, so that its first SEND finds one.
func (r *regions) Open() (Session, error) {
	s := &regionSession{r: r}
	if err := s.setup(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// regionSession is one client of the memory node: an RC QP whose
// receives come from its own SRQ, its CQ and its receive buffers.
type regionSession struct {
	r   *regions
	srq verbs.SRQ
	cq  verbs.CQ
	buf verbs.MR

	wc     []verbs.WC
	recvs  []verbs.RecvWR // receive i lands in slot i (echo) or the sink
	batch  []verbs.RecvWR // receives to re-post, reused
	echoes []verbs.SendWR // echo SENDs to post, reused
	sgl    []verbs.SGE    // one SGE per echo slot
}

func (s *regionSession) setup() (err error) {
	cfg := s.r.cfg
	slots := recvSlots(cfg)
	if s.srq, err = s.r.pd.CreateSRQ(cfg.Recv, 1); err != nil {
		return fmt.Errorf("create SRQ: %w", err)
	}
	if s.cq, err = s.r.dev.CreateCQ(cqDepth(cfg.Recv)); err != nil {
		return fmt.Errorf("create CQ: %w", err)
	}
	if s.buf, err = s.r.pd.AllocMR(slots*cfg.RecvSize, verbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("receive buffers: %w", err)
	}
	s.wc = make([]verbs.WC, cqDepth(cfg.Recv))
	s.recvs = make([]verbs.RecvWR, cfg.Recv)
	s.sgl = make([]verbs.SGE, slots)
	for i := range s.sgl {
		s.sgl[i] = verbs.SGE{Addr: s.buf.Addr() + uint64(i*cfg.RecvSize), Length: uint32(cfg.RecvSize), LKey: s.buf.LKey()}
	}
	for i := range s.recvs {
		s.recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: s.sgl[i%slots : i%slots+1 : i%slots+1]}
	}
	s.batch = make([]verbs.RecvWR, 0, cfg.Recv)
	if cfg.Echo {
		s.echoes = make([]verbs.SendWR, 0, cfg.Recv)
		// The echo's SGE is its own copy: its length is the message's.
		s.sgl = append([]verbs.SGE(nil), s.sgl...)
	}
	return s.srq.PostRecv(s.recvs)
}

// Options: one CQ for both queues, the SRQ, room for an echo per receive
// and the probe, and the regions' descriptors as private data.
func (s *regionSession) Options() cm.Options {
	cfg := s.r.cfg
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq,
		Cap:         verbs.QPCap{MaxSendWR: cfg.Recv + 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		Access:      verbs.AccessLocalWrite | cfg.Access,
		PrivateData: s.r.private}
}

// Serve re-posts consumed receives and, with Echo, sends every message
// back, re-posting its receive when the echo completed (the buffer is the
// echo's payload until then). It polls adaptively (a short spin keeps an
// echo ping-pong from paying an idle CPU's wake-up, then it parks on the
// completion event) and allocates nothing.
func (s *regionSession) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	echo := s.r.cfg.Echo
	for {
		k, err := verbs.PollWait(ctx, cq, s.wc, verbs.PollAdaptive)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
		s.batch, s.echoes = s.batch[:0], s.echoes[:0]
		for i := range k {
			wc := &s.wc[i]
			if wc.Status != verbs.StatusSuccess {
				return s.failure(wc)
			}
			switch {
			case wc.Opcode == verbs.WCRecv && echo:
				id := wc.ID
				sge := &s.sgl[id]
				sge.Length = wc.ByteLen
				wr := verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled}
				if wc.ByteLen > 0 {
					wr.SGL = s.sgl[id : id+1 : id+1]
				}
				s.echoes = append(s.echoes, wr)
			case wc.Opcode == verbs.WCRecv, wc.Opcode == verbs.WCRecvRDMAWithImm, wc.Opcode == verbs.WCSend:
				// A message to drop, a WRITE_WITH_IMM's notification, or a
				// completed echo: the receive is free again.
				s.batch = append(s.batch, s.recvs[wc.ID])
			}
		}
		if len(s.batch) > 0 {
			if err := s.srq.PostRecv(s.batch); err != nil {
				return fmt.Errorf("re-post receives: %w", err)
			}
		}
		if len(s.echoes) > 0 {
			if err := qp.PostSend(s.echoes); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
		}
	}
}

// failure describes a failed completion.
func (s *regionSession) failure(wc *verbs.WC) error {
	switch {
	case wc.Status == verbs.StatusLocLenErr:
		return fmt.Errorf("a message larger than the receives (%d B): %w", s.r.cfg.RecvSize, wc.Err())
	case s.r.cfg.Echo:
		return fmt.Errorf("receive or echo %d: %w", wc.ID, wc.Err())
	}
	return fmt.Errorf("receive %d: %w", wc.ID, wc.Err())
}

// Close frees the SRQ, the CQ and the buffers (the QP is gone).
func (s *regionSession) Close() error {
	var errs []error
	if s.srq != nil {
		errs = append(errs, s.srq.Destroy())
	}
	if s.cq != nil {
		errs = append(errs, s.cq.Destroy())
	}
	if s.buf != nil {
		errs = append(errs, s.buf.Deregister())
	}
	return errors.Join(errs...)
}

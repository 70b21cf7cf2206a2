package rpc

import (
	"context"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// probeID is the wr_id (below the client's tag) of the liveness probe:
// above every slot and receive index.
const probeID = verbs.LowMask

// watch probes the server while calls wait with nothing completing: every
// Probe, if a call is in flight, no completion of the client's own came
// since the last look and no probe is outstanding, it posts a zero-length
// READ of the server QP's scratch area. Its failure (complete) fails the
// connection; its success only says the server's QP is there.
func (c *Client) watch(ctx context.Context) {
	defer close(c.watched)
	t := time.NewTicker(c.cfg.Probe)
	defer t.Stop()
	last := c.seen.Load()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.seen.Load()
		busy := len(c.free) < c.cfg.Slots
		if busy && now == last && !c.probing.Load() {
			c.probing.Store(true)
			c.submit(verbs.SendWR{ID: c.tag.ID(probeID), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
				RemoteAddr: verbs.ScratchBase})
		}
		last = now
	}
}

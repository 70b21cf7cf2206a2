package farm

import (
	"maps"
	"slices"
	"time"
)

// Reconfiguration: a node follows the membership's configuration, and
// at each new epoch stops the world, as FaRM's reconfiguration does:
//
//  1. it takes the new configuration (a shard it was first backup of
//     and whose primary is out is now its own: its backup copy becomes
//     the primary copy that LOCKs lock and clients READ), and stops
//     admitting clients (MethodOpen answers ErrEpoch);
//  2. it fences every client session and ends its connection: a transaction under way may hold
//     locks at the lost primary, whose lock table is gone, and clients
//     must route by the new configuration (they redial, learn it, and
//     open sessions of the new epoch);
//  3. it recovers every transaction it holds locks or COMMIT-BACKUP
//     records of, asking only the nodes still in (recovery.go): a
//     committed transaction's records are at every live holder, so the
//     new primary's copy gets its writes before anyone reads it;
//  4. it admits clients again.

// reconfigurePoll is how often a reconfiguring node looks whether its
// recoveries are done.
const reconfigurePoll = 5 * time.Millisecond

// follow applies the membership's configurations until the node closes.
func (n *Node) follow() {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		epoch := n.conf.Epoch
		n.mu.Unlock()
		c, err := n.members.Wait(n.ctx, epoch+1)
		if err != nil {
			return
		}
		n.reconfigure(c)
	}
}

// reconfigure moves the node to configuration c.
func (n *Node) reconfigure(c Configuration) {
	n.mu.Lock()
	n.log.Warn("farm: reconfiguring", "node", n.index, "epoch", c.Epoch, "primaries", c.Primaries)
	n.conf, n.serving = c, false
	n.confs[c.Epoch] = c
	for s := range n.sessions {
		if s.ring != nil {
			n.stopSession(s)
			if s.end != nil {
				s.end() // the client sees its connection end, and redials
			}
		}
	}
	todo := slices.Collect(maps.Keys(n.locks))
	for k := range n.pending {
		if !slices.Contains(todo, k) {
			todo = append(todo, k)
		}
	}
	n.stats.Reconfigurations++
	n.mu.Unlock()
	for _, k := range todo {
		n.startRecovery(k)
	}
	t := time.NewTicker(reconfigurePoll)
	defer t.Stop()
	for {
		n.mu.Lock()
		left := 0
		for _, k := range todo {
			if n.locks[k] != nil || n.pending[k] != nil {
				left++
			}
		}
		if left == 0 && n.conf.Epoch == c.Epoch {
			n.serving = true
		}
		n.mu.Unlock()
		if left == 0 {
			n.log.Warn("farm: reconfigured", "node", n.index, "epoch", c.Epoch)
			return
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

package farm

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// Recovery of a transaction whose coordinator is gone or too slow (see
// the package doc for why it is safe). Any node that holds its locks or
// its COMMIT-BACKUP records may run it, and several may at once: they
// decide the same.
//
//  1. Fence the coordinator at every node that holds a copy of a shard
//     the transaction writes (MethodFence): each moves the coordinator's
//     connections to ERROR, waits out the writes landing, takes the
//     records that landed, and takes no more. It answers, for each
//     written shard it backs up, whether it holds (or applied) the
//     shard's COMMIT-BACKUP record.
//  2. Decide: commit if every backup of every written shard holds its
//     record, else abort.
//  3. Tell every such node (MethodDecide): primaries install or release
//     the locks, backups apply or drop the records.
//
// A node that does not answer is asked again, a quarter lease later,
// until it does or this node closes.

// startRecovery recovers transaction k in the background, unless it is
// being recovered here already.
func (n *Node) startRecovery(k txKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.recovering[k] || n.closed.Load() {
		return
	}
	n.recovering[k] = true
	n.wg.Add(1)
	go n.recover(k)
}

// recover runs the recovery of transaction k.
func (n *Node) recover(k txKey) {
	defer n.wg.Done()
	defer func() {
		n.mu.Lock()
		delete(n.recovering, k)
		n.mu.Unlock()
	}()
	n.mu.Lock()
	var info txInfo
	var epoch uint64
	if r := n.locks[k]; r != nil {
		info, epoch = r.info, r.epoch
	} else if r := n.pending[k]; r != nil {
		info, epoch = r.info, r.epoch
	}
	n.mu.Unlock()
	if info.parts == nil {
		return // resolved meanwhile
	}
	for {
		commit, err := n.tryRecover(k, info, epoch)
		if err == nil {
			n.mu.Lock()
			if commit {
				n.stats.Recovered++
			} else {
				n.stats.RecoverAborts++
			}
			n.mu.Unlock()
			n.log.Info("farm: recovered a transaction", "client", fmt.Sprintf("%#x", k.client), "seq", k.seq, "commit", commit)
			return
		}
		n.log.Warn("farm: recovery incomplete; retrying", "client", fmt.Sprintf("%#x", k.client), "seq", k.seq, "err", err)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(n.cfg.Lease / 4):
		}
	}
}

// tryRecover runs the three steps once, for a transaction of the given
// epoch. It asks only the nodes not taken out: the decision reads the
// records the live log holders of each written shard (at the
// transaction's epoch) hold. A shard whose holders are all out gives no
// evidence; when no written shard has a live holder the transaction
// aborts: with one node lost per epoch that is a transaction on one
// shard whose COMMIT-PRIMARY record, had it landed, was taken by the
// fence (its locks would be gone and the decision a no-op).
func (n *Node) tryRecover(k txKey, info txInfo, epoch uint64) (bool, error) {
	n.mu.Lock()
	l, parts, conf, out := n.layout, info.parts, n.confs[epoch], slices.Clone(n.conf.Out)
	n.mu.Unlock()
	if conf.Primaries == nil {
		return false, fmt.Errorf("%w: a transaction of unknown epoch %d", ErrProtocol, epoch)
	}
	var nodes []int
	for _, p := range parts {
		for _, r := range l.Replicas(p) {
			if !slices.Contains(nodes, r) && !out[r] {
				nodes = append(nodes, r)
			}
		}
	}
	req := binary.LittleEndian.AppendUint64(nil, k.client)
	req = binary.LittleEndian.AppendUint64(req, k.seq)
	req = info.append(req)
	commit, evidence := true, false
	for _, node := range nodes {
		holds, err := n.ask(node, MethodFence, req)
		if err != nil {
			return false, err
		}
		if len(holds) != len(parts) {
			return false, fmt.Errorf("%w: fence answer of %d bytes for %d shards", ErrProtocol, len(holds), len(parts))
		}
		for i, p := range parts {
			if slices.Contains(logHolders(&conf, p), node) {
				evidence = true
				if holds[i] != 1 {
					commit = false
				}
			}
		}
	}
	commit = commit && evidence
	dec := binary.LittleEndian.AppendUint64(nil, k.client)
	dec = binary.LittleEndian.AppendUint64(dec, k.seq)
	if commit {
		dec = append(dec, 1)
	} else {
		dec = append(dec, 0)
	}
	for _, node := range nodes {
		if _, err := n.ask(node, MethodDecide, dec); err != nil {
			return false, err
		}
	}
	return commit, nil
}

// peerTimeout bounds one recovery call to another node.
const peerTimeout = 2 * time.Second

// ask calls method at node (itself directly).
func (n *Node) ask(node int, method uint16, req []byte) ([]byte, error) {
	resp := make([]byte, 256)
	if node == n.index {
		var m int
		var err error
		switch method {
		case MethodFence:
			m, err = n.fenceCall(req, resp)
		default:
			m, err = n.decideCall(req, resp)
		}
		return resp[:m], err
	}
	ctx, cancel := context.WithTimeout(n.ctx, peerTimeout)
	defer cancel()
	p, err := n.peer(ctx, node)
	if err != nil {
		return nil, err
	}
	m, err := p.rpc.Call(ctx, method, req, resp)
	if err != nil {
		n.dropPeer(node, p)
		return nil, fmt.Errorf("node %d: %w", node, err)
	}
	return resp[:m], nil
}

// fenceCall is MethodFence: fence the connection the transaction's
// coordinator uses for it here (it writes a transaction's records on
// that one only; its others live on), then say which of the
// transaction's shards' COMMIT-BACKUP records this node holds.
func (n *Node) fenceCall(req, resp []byte) (int, error) {
	t0 := time.Now()
	defer n.busy(t0)
	if len(req) < 16 {
		return 0, fmt.Errorf("%w: a %d-byte fence", ErrProtocol, len(req))
	}
	k := txKey{binary.LittleEndian.Uint64(req), binary.LittleEndian.Uint64(req[8:])}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.layout == nil {
		return 0, ErrNoLayout
	}
	info, _, err := parseTxInfo(req[16:], n.layout.Shards())
	if err != nil {
		return 0, err
	}
	parts := info.parts
	if len(parts) > len(resp) {
		return 0, fmt.Errorf("%w: %d shards", ErrProtocol, len(parts))
	}
	for s := range n.sessions {
		if s.client == k.client && s.ring != nil && s.id == info.sids[n.index] {
			n.stopSession(s)
		}
	}
	applied := n.applied.has(k)
	r := n.pending[k]
	for i, p := range parts {
		resp[i] = 0
		if applied {
			resp[i] = 1
		} else if r != nil {
			if _, ok := r.shards[p]; ok {
				resp[i] = 1
			}
		}
	}
	return len(parts), nil
}

// decideCall is MethodDecide: install or release the transaction's
// locks, apply or drop its backup records.
func (n *Node) decideCall(req, _ []byte) (int, error) {
	t0 := time.Now()
	defer n.busy(t0)
	if len(req) != 17 {
		return 0, fmt.Errorf("%w: a %d-byte decide", ErrProtocol, len(req))
	}
	k := txKey{binary.LittleEndian.Uint64(req), binary.LittleEndian.Uint64(req[8:])}
	commit := req[16] == 1
	n.mu.Lock()
	defer n.mu.Unlock()
	if r := n.locks[k]; r != nil {
		if commit {
			n.install(r)
		} else {
			n.release(r)
		}
		delete(n.locks, k)
	}
	if commit {
		n.commitBackup(k)
	} else {
		delete(n.pending, k)
	}
	return 0, nil
}

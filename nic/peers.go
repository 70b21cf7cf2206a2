package nic

import (
	"fmt"
	"sync"
)

// PeerTable numbers the peers that connect to a node from other processes:
// the id becomes WC.SrcID of the receives they cause, and Network.ResolveID
// turns it back into their address. The zero PeerTable is ready; it is
// safe for concurrent use.
type PeerTable struct {
	mu   sync.Mutex
	ids  map[uint32]*peerEntry
	next uint32
}

// peerEntry is a numbered peer and how many of its connections hold the
// number.
type peerEntry struct {
	address string
	refs    int
}

// Add returns the id of the peer at address, numbering it on first sight;
// each Add holds the number until a Drop.
func (t *PeerTable) Add(address string) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, e := range t.ids {
		if e.address == address {
			e.refs++
			return id
		}
	}
	if t.ids == nil {
		t.ids = map[uint32]*peerEntry{}
	}
	t.next++
	t.ids[t.next] = &peerEntry{address: address, refs: 1}
	return t.next
}

// Drop releases what one Add of id holds: a peer whose connections are all
// gone is forgotten (a transport calls it when a connection ends, so the
// table does not grow with every peer that ever came).
func (t *PeerTable) Drop(id uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.ids[id]; e != nil {
		if e.refs--; e.refs <= 0 {
			delete(t.ids, id)
		}
	}
}

// Len returns how many peers the table numbers.
func (t *PeerTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ids)
}

// Address returns the address of peer id.
func (t *PeerTable) Address(id uint32) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.ids[id]
	if !ok {
		return "", fmt.Errorf("no peer with id %d", id)
	}
	return e.address, nil
}

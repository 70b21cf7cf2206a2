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
	ids  map[uint32]string
	next uint32
}

// Add returns the id of the peer at address, numbering it on first sight.
func (t *PeerTable) Add(address string) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, a := range t.ids {
		if a == address {
			return id
		}
	}
	if t.ids == nil {
		t.ids = map[uint32]string{}
	}
	t.next++
	t.ids[t.next] = address
	return t.next
}

// Address returns the address of peer id.
func (t *PeerTable) Address(id uint32) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.ids[id]
	if !ok {
		return "", fmt.Errorf("no peer with id %d", id)
	}
	return a, nil
}

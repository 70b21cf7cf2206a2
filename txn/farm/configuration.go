package farm

import (
	"fmt"

	"github.com/rdmakit/rdmakit/txn/internal/membership"
)

// Configuration is the membership of a database at one epoch: which node
// holds each shard's primary copy and which its backups, and which nodes
// are out (package txn/internal/membership). The raft group of the nodes
// (Membership) holds it: every member applies the same changes in the
// same order, so all agree on the configuration of each epoch.
type Configuration = membership.Configuration

// InitialConfiguration is the placement of a layout at epoch 1: shard
// s's primary node s, its backups s+1 … s+F.
func InitialConfiguration(l Layout) Configuration {
	l.defaults()
	return membership.Initial(len(l.Nodes), l.F)
}

// unmarshalConfiguration decodes a configuration from a node.
func unmarshalConfiguration(b []byte) (Configuration, error) {
	c, err := membership.Unmarshal(b)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return c, nil
}

// logHolders are the nodes whose logs take shard s's COMMIT-BACKUP
// records in c: its backups, or its primary itself when it has none left
// (the decision log of a shard without backup: recovery decides from
// the records, and a shard with no node to hold them would make "every
// holder holds its record" vacuous).
func logHolders(c *Configuration, s int) []int {
	if len(c.Backups[s]) > 0 {
		return c.Backups[s]
	}
	return []int{c.Primaries[s]}
}

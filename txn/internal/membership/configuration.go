package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrProtocol: bytes from a peer or a client that do not decode (a
// configuration, a command, a frame of the transport).
var ErrProtocol = errors.New("membership: protocol error")

// ErrConfig: a membership configured with nodes it cannot hold.
var ErrConfig = errors.New("membership: bad configuration")

// Configuration is the membership of a database at one epoch: which node
// holds each shard's primary copy and which its backups, and which nodes
// are out. The raft group of the nodes (membership.go) holds it: every
// member applies the same changes in the same order, so all agree on the
// configuration of each epoch.
type Configuration struct {
	// Epoch counts the changes: 1 for the layout's own placement, +1
	// per node taken out.
	Epoch uint64
	// Primaries is the node holding each shard's primary copy.
	Primaries []int
	// Backups is, per shard, the nodes holding its backup copies, in
	// promotion order.
	Backups [][]int
	// Out marks the nodes taken out (silent for longer than the
	// membership's Silence); they never come back in this database.
	Out []bool
}

// Initial is the placement at epoch 1 of nodes nodes (one shard each)
// with f backups per shard: shard s's primary node s, its backups s+1 …
// s+f (mod nodes).
func Initial(nodes, f int) Configuration {
	c := Configuration{Epoch: 1, Primaries: make([]int, nodes), Backups: make([][]int, nodes), Out: make([]bool, nodes)}
	for s := range c.Primaries {
		c.Primaries[s] = s
		for i := 1; i <= f && i < nodes; i++ {
			c.Backups[s] = append(c.Backups[s], (s+i)%nodes)
		}
	}
	return c
}

// Replicas are the nodes holding shard s in c, the primary first.
func (c *Configuration) Replicas(s int) []int {
	return append([]int{c.Primaries[s]}, c.Backups[s]...)
}

// Clone returns a deep copy of c.
func (c Configuration) Clone() Configuration {
	d := Configuration{Epoch: c.Epoch, Primaries: slices.Clone(c.Primaries), Out: slices.Clone(c.Out), Backups: make([][]int, len(c.Backups))}
	for i, b := range c.Backups {
		d.Backups[i] = slices.Clone(b)
	}
	return d
}

// LastCopy reports whether node holds the only copy left of a shard.
func (c *Configuration) LastCopy(node int) bool {
	for s, p := range c.Primaries {
		if p == node && len(c.Backups[s]) == 0 {
			return true
		}
	}
	return false
}

// Remove takes node out: it leaves every shard's backups, and each shard
// it was primary of is promoted to its first backup (a shard with none
// keeps it as primary: it is lost, and says so by Out). The epoch moves
// on. Removing a node that is out already, or the last node in, changes
// nothing and returns false.
func (c *Configuration) Remove(node int) bool {
	if node < 0 || node >= len(c.Out) || c.Out[node] {
		return false
	}
	in := 0
	for _, o := range c.Out {
		if !o {
			in++
		}
	}
	if in <= 1 {
		return false
	}
	c.Out[node] = true
	for s := range c.Primaries {
		c.Backups[s] = slices.DeleteFunc(c.Backups[s], func(b int) bool { return b == node })
		if c.Primaries[s] == node && len(c.Backups[s]) > 0 {
			c.Primaries[s], c.Backups[s] = c.Backups[s][0], c.Backups[s][1:]
		}
	}
	c.Epoch++
	return true
}

// A command of the membership's raft log: u8 kind | u32 node. The one
// kind takes a node out.
const (
	cmdRemove  = 1
	commandLen = 5
)

// RemoveCommand is the command that takes node out.
func RemoveCommand(node int) []byte {
	return binary.LittleEndian.AppendUint32([]byte{cmdRemove}, uint32(node))
}

// ApplyCommand applies a raft log entry's command to c; a command that
// does not decode changes nothing (every member skips it alike).
func (c *Configuration) ApplyCommand(b []byte) (bool, error) {
	if len(b) != commandLen || b[0] != cmdRemove {
		return false, fmt.Errorf("%w: a %d-byte membership command", ErrProtocol, len(b))
	}
	return c.Remove(int(binary.LittleEndian.Uint32(b[1:]))), nil
}

// Marshal encodes c: u64 epoch | u8 nodes | nodes × u8 out | u8 shards
// | shards × (u8 primary | u8 backups | backups × u8 node).
func (c *Configuration) Marshal() []byte {
	b := binary.LittleEndian.AppendUint64(nil, c.Epoch)
	b = append(b, byte(len(c.Out)))
	for _, o := range c.Out {
		if o {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	b = append(b, byte(len(c.Primaries)))
	for s, p := range c.Primaries {
		b = append(b, byte(p), byte(len(c.Backups[s])))
		for _, n := range c.Backups[s] {
			b = append(b, byte(n))
		}
	}
	return b
}

// Unmarshal decodes Marshal's bytes, checking that every
// node named is one of the configuration's.
func Unmarshal(b []byte) (Configuration, error) {
	var c Configuration
	short := fmt.Errorf("%w: a short configuration", ErrProtocol)
	if len(b) < 9 || len(b) < 10+int(b[8]) {
		return c, short
	}
	c.Epoch = binary.LittleEndian.Uint64(b)
	nodes := int(b[8])
	b = b[9:]
	c.Out = make([]bool, nodes)
	for i := range c.Out {
		c.Out[i] = b[i] == 1
	}
	shards := int(b[nodes])
	b = b[nodes+1:]
	if shards != nodes {
		return c, fmt.Errorf("%w: a configuration of %d shards on %d nodes", ErrProtocol, shards, nodes)
	}
	c.Primaries, c.Backups = make([]int, shards), make([][]int, shards)
	for s := range shards {
		if len(b) < 2 || len(b) < 2+int(b[1]) {
			return c, short
		}
		c.Primaries[s] = int(b[0])
		c.Backups[s] = make([]int, int(b[1]))
		for i := range c.Backups[s] {
			c.Backups[s][i] = int(b[2+i])
		}
		if slices.ContainsFunc(append([]int{c.Primaries[s]}, c.Backups[s]...), func(n int) bool { return n >= nodes }) {
			return c, fmt.Errorf("%w: a configuration naming node %d of %d", ErrProtocol, max(c.Primaries[s], slices.Max(append(c.Backups[s], 0))), nodes)
		}
		b = b[2+len(c.Backups[s]):]
	}
	if len(b) != 0 {
		return c, fmt.Errorf("%w: %d bytes after a configuration", ErrProtocol, len(b))
	}
	return c, nil
}

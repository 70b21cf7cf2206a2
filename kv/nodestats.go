package kv

// NodeStats are a store node's own counters, for its /metrics
// (rdmakit kv serve). A count a design cannot know without its clients
// is -1: clients of the one-sided designs change the index without the
// node's CPU, so the node learns what it holds by looking at its memory.
type NodeStats struct {
	// Keys is the number of keys with a value.
	Keys int64
	// Slots is the size of the index (slots, entries); SlotsFree how many
	// of them can take a new key.
	Slots, SlotsFree int64
	// Memory is the bytes for items; MemoryFree how many of them are not
	// handed out.
	Memory, MemoryFree int64
	// Ops counts what the node's CPU served, by name (RPCs: put, delete,
	// alloc; buffers recycled). The one-sided operations are the NIC's:
	// rdmakit_ops_total counts them by opcode.
	Ops map[string]uint64
}

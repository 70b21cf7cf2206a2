package race

// SetHook has f called at each hook point of every client of this
// process (set it before the clients start): a child process stops
// there to be killed holding what the point holds.
func SetHook(f func(point string)) { testHook = f }

// The hook points.
const (
	HookEntered        = hookEntered
	HookSplitLocked    = hookSplitLocked
	HookSplitDirLocked = hookSplitDirLocked
	HookSplitPublished = hookSplitPublished
)

// RPCs counts the client's RPCs (part of RoundTrips).
func (c *Client) RPCs() uint64 { return c.rpcs.Load() }

// Used is the memory the node has handed out: subtables and block
// chunks, each 64-byte aligned.
func (s *Server) Used() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bump - s.heap
}

// SubtableSize and ChunkSize are the sizes of the node's allocations.
const (
	SubtableSize = subtableSize
	ChunkSize    = chunkSize
)

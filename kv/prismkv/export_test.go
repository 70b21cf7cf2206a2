package prismkv

import "time"

// SetHook has f called at each hook point of every client of this
// process (set it before the clients start): a child process stops
// there to be killed holding what the point holds.
func SetHook(f func(point string)) { testHook = f }

// The hook points.
const (
	HookLocked    = hookLocked
	HookReturning = hookReturning
)

// SegSlots is how many slots share a segment lock.
const SegSlots = segSlots

// SetRingGrace sets how long the node's return ring waits for a
// reserved slot's fill (prism.HoleGrace).
func SetRingGrace(s *Server, d time.Duration) { s.ring.SetHoleGrace(d) }

// RingHoles is how many never-filled return ring slots the node passed.
func (s *Server) RingHoles() uint64 { return s.ring.Holes() }

// Takeovers counts the segment locks c took over after their lease.
func (c *Client) Takeovers() uint64 { return c.takeovers.Load() }

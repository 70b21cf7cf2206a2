package transfer

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Defaults of Config.
const (
	DefaultThreshold     = 32 << 10 // the thesis' IB_READ_MIN_SIZE
	DefaultSlots         = 16
	DefaultSlotSize      = 64 << 10
	DefaultConcurrency   = 16
	DefaultWorkers       = 8
	DefaultProbeInterval = 100 * time.Millisecond
	DefaultFinTimeout    = 30 * time.Second
	// MinSlots and MaxSlots bound Config.Slots: the credit scheme needs
	// three (doc.go), credits travel as 16-bit counts.
	MinSlots = 3
	MaxSlots = 4096
	// MinSlotSize is the smallest slot: a CHUNK header and some payload.
	MinSlotSize = 256
)

// Config configures a Fetcher, and the pairs and TCP connections of a
// Server (which read Slots, SlotSize, Workers, FinTimeout,
// ProbeInterval, Poll and Logger). Zero values take the defaults.
type Config struct {
	// Protocol is how the Fetcher moves objects.
	Protocol Protocol
	// Threshold is the hybrid's switch: objects of dataSize+metaSize >=
	// Threshold bytes go by READ. Zero means DefaultThreshold.
	Threshold int
	// Slots and SlotSize are each side's pre-posted receive slots (and as
	// many send buffers) per pair: the credit window. A CHUNK carries
	// SlotSize-16 bytes of payload. Both sides of a pair must have the
	// same Slots and SlotSize: they tell each other when the pair
	// connects, and a mismatch fails the connection with ErrProtocol.
	Slots, SlotSize int
	// Peers are the holders' addresses, asked in order (the store where
	// an ID was last found first): Server.VerbsAddr for the verbs
	// protocols, Server.TCPAddr for TCP4K and TCPBulk.
	Peers []string
	// Device is the Fetcher's verbs device (required for the verbs
	// protocols). It must support verbs.MemRegistrar for READ.
	Device verbs.Device
	// Concurrency bounds the transfers one Fetch call runs at once.
	Concurrency int
	// Workers is how many transfers a holder serves at once per pair;
	// more requests wait in their receive slots (and hold back the
	// fetcher's credits).
	Workers int
	// ProbeInterval: while transfers are in progress and the peer has
	// been silent this long, a side READs 8 bytes of the peer's probe
	// region; a dead peer fails the READ and with it the pair.
	ProbeInterval time.Duration
	// FinTimeout bounds how long a holder waits for the FIN of a READ
	// (with its object pinned and registered) and for credits; a fetcher
	// that exceeds it loses the pair.
	FinTimeout time.Duration
	// Arena and ArenaPD, when set, are memory the store's objects live
	// in that is registered already: an MR of ArenaPD on the side's
	// device (the holder's with AccessRemoteRead, the fetcher's with
	// AccessLocalWrite), e.g. the one the store was given as its arena
	// (objstore.Config.Memory). An object inside it is READ — and READ
	// into — by the arena's keys with no registration per transfer (the
	// thesis' future work: pre-registering the store's memory), and the
	// pairs' QPs are made in ArenaPD instead of a PD each. The price: the
	// arena's rkey is the same for every object and every pair and lives
	// as long as the arena, so any peer that connected a pair may READ
	// all of it, not one object until its FIN. Objects outside the arena
	// are registered per transfer as without it.
	Arena   verbs.MR
	ArenaPD verbs.PD
	// Poll is the completion polling policy of the pairs' pollers.
	// The zero value means verbs.PollAdaptive.
	Poll verbs.PollPolicy
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults fills zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.SlotSize == 0 {
		c.SlotSize = DefaultSlotSize
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.FinTimeout == 0 {
		c.FinTimeout = DefaultFinTimeout
	}
	if c.Poll == (verbs.PollPolicy{}) {
		c.Poll = verbs.PollAdaptive
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Protocol >= numProtocols:
		return c, fmt.Errorf("%w: protocol %v", verbs.ErrInvalidArg, c.Protocol)
	case c.Threshold < 0:
		return c, fmt.Errorf("%w: threshold %d", verbs.ErrInvalidArg, c.Threshold)
	case c.Slots < MinSlots || c.Slots > MaxSlots:
		return c, fmt.Errorf("%w: %d slots (%d … %d)", verbs.ErrInvalidArg, c.Slots, MinSlots, MaxSlots)
	case c.SlotSize < MinSlotSize || c.SlotSize > 1<<30:
		return c, fmt.Errorf("%w: slot size %d (%d … 1 GiB)", verbs.ErrInvalidArg, c.SlotSize, MinSlotSize)
	case (c.Arena == nil) != (c.ArenaPD == nil):
		return c, fmt.Errorf("%w: Arena and ArenaPD go together", verbs.ErrInvalidArg)
	case c.Concurrency < 0 || c.Workers < 0 || c.ProbeInterval < 0 || c.FinTimeout < 0:
		return c, fmt.Errorf("%w: negative concurrency, workers, probe interval or FIN timeout", verbs.ErrInvalidArg)
	}
	return c, nil
}

// ackThreshold is how many re-posted slots a side owes its peer before
// it returns them in an ACK of their own instead of waiting for a
// message to piggy-back them on (doc.go, "Flow control").
func (c *Config) ackThreshold() int { return max(2, c.Slots/2) }

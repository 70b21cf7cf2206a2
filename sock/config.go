package sock

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Mode says which goroutines move a partition's records.
type Mode uint8

const (
	// Direct: the application's goroutines do the partition's work — a
	// Write copies its slices into the peer's ring itself, a Read polls its
	// partition's ring and dispatches what it finds (the thesis'
	// direct-nts: no hand-off on the critical path). Fewest goroutines and
	// the lowest latency on a small machine. The default.
	Direct Mode = iota
	// SP2C (single partition, two cores): each partition has a TX
	// goroutine that forwards the connections' queued writes round-robin
	// and an RX goroutine that polls the ring and dispatches. Write only
	// queues; lowest tail latency when cores are plentiful.
	SP2C
	// SPSC (single partition, single core): one goroutine per partition
	// alternates TX and RX rounds. Half the goroutines of SP2C.
	SPSC
)

// String returns "direct", "sp2c" or "spsc".
func (m Mode) String() string {
	switch m {
	case Direct:
		return "direct"
	case SP2C:
		return "sp2c"
	case SPSC:
		return "spsc"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses "direct", "sp2c" or "spsc".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Direct, SP2C, SPSC} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("sock: unknown mode %q (direct, sp2c, spsc): %w", s, ErrInvalidConfig)
}

// Defaults of Config's zero fields. Over shm rings and windows are small on
// purpose: a stream's bytes then stay in the CPU's caches between the
// sender's copy and the receiver's (64 KiB writes went from 1.8 to 4.6 GB/s
// when 4 MiB rings and 1 MiB windows became 512 KiB and 256 KiB). Over tcp
// the window must cover the bandwidth-delay product of a soft NIC's round
// trip instead: larger rings and windows.
const (
	DefaultPartitions     = 2
	DefaultRingSize       = 512 << 10
	DefaultRingSizeTCP    = 8 << 20
	DefaultMTU            = 16 << 10
	DefaultBatchLimit     = 4
	DefaultReadBuffer     = 256 << 10
	DefaultReadBufferTCP  = 4 << 20
	DefaultWriteBuffer    = 256 << 10
	DefaultWriteBufferTCP = 4 << 20
	DefaultSpin           = 50 * time.Microsecond
	DefaultBacklog        = 128
	// MaxPartitions bounds Config.Partitions.
	MaxPartitions = 32
	// MaxConns is the number of connections one link carries at once.
	MaxConns = 1 << 16
)

// Config configures an endpoint's side of its links and connections. The
// zero value is ready to use. A listener's partition count, MTU and slicing
// are the link's: a dialer adopts them.
type Config struct {
	// Partitions is the number of rings each side of a link has (the
	// thesis' partitions); connections are assigned to them round-robin.
	// Zero means DefaultPartitions; at most MaxPartitions.
	Partitions int
	// RingSize is the bytes of each partition ring in this side's window
	// (a power of two, at least 64 KiB and 4 MTUs). Zero means
	// DefaultRingSize over shm, DefaultRingSizeTCP over tcp.
	RingSize int
	// MTU is the largest record payload: writes are sliced into records of
	// at most MTU bytes (the thesis' slicing against head-of-line blocking).
	// Zero means DefaultMTU; at most RingSize/4.
	MTU int
	// NoSlicing sends each Write as few records as the ring allows
	// (RingSize/4 bytes each) instead of MTU-sized slices — for the
	// isolation experiment's "off" rows.
	NoSlicing bool
	// BatchLimit is how many records one connection may send per turn on
	// its partition before the next connection waiting for the partition
	// gets it (the per-round batch limit). Zero means DefaultBatchLimit;
	// negative means no limit (a Write keeps the partition to its end).
	BatchLimit int
	// Mode chooses who moves records: Direct (default), SP2C or SPSC.
	Mode Mode
	// ReadBuffer and WriteBuffer are each connection's initial receive
	// window (the credit its peer starts with) and, in SP2C and SPSC, its
	// send queue. Conn.SetReadBuffer and SetWriteBuffer change them. Zero
	// means the defaults (the TCP ones over tcp).
	ReadBuffer, WriteBuffer int
	// Spin is how long a goroutine polls before it parks and asks the peer
	// for a doorbell. Zero means DefaultSpin; negative means never spin.
	Spin time.Duration
	// Backlog is the number of connections waiting for Accept. Zero means
	// DefaultBacklog.
	Backlog int
	// App names the application to peers and the control plane (sockd's
	// quotas and allow-list are per application). Empty means the base
	// name of the executable.
	App string
	// Control is the host's control plane (a sockd client): listeners
	// register with it and ask it to admit each connection; Dialer's
	// DialContext asks it whether a plain address has an rdmakit endpoint.
	// Nil means none.
	Control ControlPlane
	// Logger receives the endpoint's logs; nil means slog.Default().
	Logger *slog.Logger
}

// forTransport fills the defaults that depend on the transport and checks
// what depends on them.
func (c Config) forTransport(transport string) (Config, error) {
	tcp := transport == "tcp"
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
		if tcp {
			c.RingSize = DefaultRingSizeTCP
		}
	}
	if c.ReadBuffer == 0 {
		c.ReadBuffer = DefaultReadBuffer
		if tcp {
			c.ReadBuffer = DefaultReadBufferTCP
		}
	}
	if c.WriteBuffer == 0 {
		c.WriteBuffer = DefaultWriteBuffer
		if tcp {
			c.WriteBuffer = DefaultWriteBufferTCP
		}
	}
	switch {
	case c.RingSize < 64<<10 || c.RingSize&(c.RingSize-1) != 0 || c.RingSize > 1<<30:
		return c, fmt.Errorf("sock: ring size %d (a power of two from 64 KiB to 1 GiB): %w", c.RingSize, ErrInvalidConfig)
	case c.MTU > c.RingSize/4:
		return c, fmt.Errorf("sock: MTU %d (at most ring size / 4): %w", c.MTU, ErrInvalidConfig)
	}
	return c, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.BatchLimit == 0 {
		c.BatchLimit = DefaultBatchLimit
	}
	if c.Spin == 0 {
		c.Spin = DefaultSpin
	}
	if c.Backlog <= 0 {
		c.Backlog = DefaultBacklog
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.App == "" {
		c.App = filepath.Base(os.Args[0])
	}
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return c, fmt.Errorf("sock: %d partitions (1 to %d): %w", c.Partitions, MaxPartitions, ErrInvalidConfig)
	case c.RingSize != 0 && (c.RingSize < 64<<10 || c.RingSize&(c.RingSize-1) != 0 || c.RingSize > 1<<30):
		return c, fmt.Errorf("sock: ring size %d (a power of two from 64 KiB to 1 GiB): %w", c.RingSize, ErrInvalidConfig)
	case c.MTU < 64 || (c.RingSize != 0 && c.MTU > c.RingSize/4) || c.MTU > hdrMaxLen:
		return c, fmt.Errorf("sock: MTU %d (64 to ring size / 4): %w", c.MTU, ErrInvalidConfig)
	case c.ReadBuffer < 0 || c.ReadBuffer > 1<<30 || c.WriteBuffer < 0 || c.WriteBuffer > 1<<30:
		return c, fmt.Errorf("sock: buffer sizes %d / %d (up to 1 GiB): %w", c.ReadBuffer, c.WriteBuffer, ErrInvalidConfig)
	case c.Mode > SPSC:
		return c, fmt.Errorf("sock: %v: %w", c.Mode, ErrInvalidConfig)
	}
	return c, nil
}

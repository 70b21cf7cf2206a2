package transfer

import "sync/atomic"

// Stats are counters of a Fetcher or a Server since it was made.
type Stats struct {
	// Transfers counts objects moved, by the protocol that moved each
	// (SendRecv or Read for the verbs protocols, TCP4K, TCPBulk), indexed
	// by Protocol; Transfers[Hybrid] stays zero.
	Transfers [numProtocols]int64
	// Bytes is the object bytes moved (data and metadata).
	Bytes int64
	// CopiedBytes is the bytes this side copied in user space: object →
	// send slot (holder) and receive slot → object (fetcher) of the
	// SEND/RECV protocol. READ and the TCP paths copy nothing here (the
	// kernel and the transport's NIC do; see doc.go).
	CopiedBytes int64
	// NotFound counts transfers the holder answered with NOT_FOUND.
	NotFound int64
	// Failed counts transfers that ended in an error.
	Failed int64
	// Pairs is the verbs pairs created (fetcher: dialed; server:
	// accepted); BufferBytes the bytes of slot buffers allocated for
	// them. A fetch over a cached pair adds to neither.
	Pairs       int64
	BufferBytes int64
	// PairsClosed counts pairs closed (failed, protocol errors, Close).
	PairsClosed int64
	// Registrations is the object regions registered now (RegMR of an
	// object for a READ, either side); it returns to zero when every
	// transfer has ended. Registered counts every such registration made
	// (none for objects in Config.Arena).
	Registrations int64
	Registered    int64
	// Pins is the objects a Server holds pinned now.
	Pins int64
}

// counters is the live form of Stats.
type counters struct {
	transfers     [numProtocols]atomic.Int64
	bytes         atomic.Int64
	copied        atomic.Int64
	notFound      atomic.Int64
	failed        atomic.Int64
	pairs         atomic.Int64
	bufferBytes   atomic.Int64
	pairsClosed   atomic.Int64
	registrations atomic.Int64
	registeredAll atomic.Int64
	pins          atomic.Int64
}

// registered counts a new object registration.
func (c *counters) registered() {
	c.registrations.Add(1)
	c.registeredAll.Add(1)
}

func (c *counters) snapshot() Stats {
	var s Stats
	for i := range c.transfers {
		s.Transfers[i] = c.transfers[i].Load()
	}
	s.Bytes = c.bytes.Load()
	s.CopiedBytes = c.copied.Load()
	s.NotFound = c.notFound.Load()
	s.Failed = c.failed.Load()
	s.Pairs = c.pairs.Load()
	s.BufferBytes = c.bufferBytes.Load()
	s.PairsClosed = c.pairsClosed.Load()
	s.Registrations = c.registrations.Load()
	s.Registered = c.registeredAll.Load()
	s.Pins = c.pins.Load()
	return s
}

// done counts one transfer of n bytes by p.
func (c *counters) done(p Protocol, n int) {
	c.transfers[p].Add(1)
	c.bytes.Add(int64(n))
}

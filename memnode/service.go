package memnode

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// Service is what a Server serves its clients: the memory node's regions
// by default, or another system's server (a key-value store node). The
// Server does the lifecycle — handshake, token, liveness, release — and
// calls the Service for what is particular to it.
type Service interface {
	// Name is the service clients ask for in Hello.Service; empty for
	// the memory node, whose clients send the bare token.
	Name() string
	// Admit decides whether a client that asked for service (its
	// Hello.Service, token already checked) is served here; a non-nil
	// error refuses it, with the error's text as the reason.
	Admit(service string) error
	// Open creates what one client needs before its QP exists: its CQ,
	// SRQ and buffers, described by Session.Options. It is called
	// concurrently for different clients.
	Open() (Session, error)
	// Describe adds the service's part of the server's Info (regions,
	// receives).
	Describe(info *Info)
	// Close releases the service's memory once no session is left.
	Close() error
}

// Session is what a Service created for one client.
type Session interface {
	// Options describe the client's QP: CQs, SRQ, capacities, access and
	// the private data of the reply. The Server sets PD.
	Options() cm.Options
	// Serve serves the client, whose QP is connected, until ctx ends
	// (it then returns nil) or the client fails (an error). cq is
	// Options().SendCQ with the Server's liveness probes taken out:
	// Serve polls it and never sees a probe.
	Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error
	// Close frees what Open created. The QP is already destroyed.
	Close() error
}

// NewServiceFunc builds a Service on the server's device and protection
// domain, once, when the Server starts.
type NewServiceFunc func(dev verbs.Device, pd verbs.PD) (Service, error)

// Preparer is a Session that has work to do on the client's QP before
// the client may use it. Prepare runs on the new QP, in INIT, before the
// server's reply tells the client the connection exists (cm.Options.Prepare):
// a session whose clients SEND first posts their receives here, so that
// the client's first message never arrives before them. When the exchange
// fails after Prepare, the QP is destroyed and then the session closed;
// Close frees what Prepare made.
type Preparer interface {
	Prepare(qp verbs.QP) error
}

// MetricsService is a Service with counters of its own (a store's keys
// and free slots): the server serves its Collector's metrics at /metrics
// next to its own.
type MetricsService interface {
	Service
	Collector() prometheus.Collector
}

// AdmitOnly is the Admit of a service that takes the clients that asked
// for serves and refuses the rest, saying what it serves.
func AdmitOnly(serves, asked string) error {
	if asked != serves {
		return fmt.Errorf("this node serves %s, not %q", serves, asked)
	}
	return nil
}

// Package transfer moves sealed objects between object stores (package
// objstore): a Server serves a holder's object.Source, a Fetcher pulls
// objects into a fetcher's object.Sink. It implements the protocols of
// the Plasma-over-RDMA thesis (seed 004): SEND/RECV through pre-posted
// slots for small objects, a READ rendezvous for large ones, the hybrid
// that switches between them at a size threshold, and the plain-TCP
// baselines (Plasma's 4 KB socket path and a bulk copy).
package transfer

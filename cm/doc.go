// Package cm is connection management for rdmakit, in the manner of
// rdma_cm: a server Listens, a client Dials, and both come away with a
// connected reliable-connected (RC) queue pair plus the private data the
// other side attached — typically the descriptors (address, length, rkey)
// of the memory regions the peer may READ, WRITE or run atomics on.
//
// The exchange runs over a TCP side channel (the rendezvous address, like
// rdma_cm's own port), separate from the RDMA transport, and uses nothing
// but the verbs API: device addresses (verbs.Device.Address), QP numbers
// and QP.Modify. The same code therefore connects loop://, shm:// and
// tcp:// devices.
//
// The exchange is rdma_cm's REQ / REP / RTU:
//
//	dialer                                  listener
//	create QP, RESET → INIT
//	REQ {device address, QPN, private data} →
//	                                        Accept returns a *Request
//	                                        Request.Accept: create QP,
//	                                        RESET → INIT → RTR → RTS
//	                                     ← REP {device address, QPN, private data}
//	INIT → RTR → RTS
//	RTU →                                   Request.Accept returns the *Conn
//
// or the listener answers REJ {reason} (Request.Reject), and Dial returns
// a *RejectedError. On any failure each side destroys the QP it created.
// Every frame is versioned and length-checked before anything is
// allocated; malformed input makes that one exchange fail with ErrProtocol
// and never affects the listener. Every blocking call honours its
// context's deadline and cancellation.
//
// Descriptors of memory regions travel as private data with EncodeDescs
// and DecodeDescs.
package cm

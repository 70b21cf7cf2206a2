// Package remotedev drives verbs devices that live in another process, for
// rdmakit's own tests and tools.
//
// The server side (Serve) runs in the process that owns the devices: for
// each control connection it opens devices with verbs.Open, executes the
// verbs calls it is sent on them and answers. The client side (Dial, then
// Client.Open) returns a verbs.Device whose every method, and every method
// of the PDs, MRs, CQs, QPs, SRQs and AHs created from it, is a remote
// call. Objects are named on the wire by integer handles.
//
// The control connection is a Unix domain socket so that memory regions can
// be shared: the devices must be opened with memory regions backed by
// memfds (tcp://…?memfd=1), and the server passes each region's memfd to the
// client with SCM_RIGHTS. The client maps it MAP_SHARED, so MR.Bytes() in
// the client is the very memory the server's NIC reads and writes, while
// Addr, LKey and RKey are the server's values: work requests carry them
// unchanged.
//
// Errors of the server's calls come back as errors that match the same
// verbs sentinels (and context errors) with errors.Is; a rejected post list
// comes back as a *verbs.PostError with the same Index. When the connection
// breaks (the server process died), every pending and later call fails with
// an error wrapping verbs.ErrClosed; memory regions already mapped stay
// readable until they are deregistered or their device is closed.
//
// # The child-process test harness
//
// The transports' tests start children by re-executing their own test
// binary, and this package is where that is written (once):
//
//   - TestMain is the test binary's TestMain: in a child it plays the
//     child's role instead of running the tests; Role registers a role and
//     Command builds the command that starts one.
//   - StartNode starts a node child, which serves devices (Serve) on a
//     Unix socket and is controlled through Node.Client; SharedNode is one
//     node shared by a binary's tests and stopped after them.
//   - CrossProcess is the verbstest provider that opens one device here and
//     the others in a node child; LoopReference is the loop provider an
//     equivalence run compares a transport with.
//   - StartChild starts a child playing a role of the test's own and
//     speaks to it in lines on its stdin and stdout (Child).
package remotedev

// Package prism is the application side of PRISM's primitives (docs/prism.md).
//
// On the server, a Pool carves a registered region into buffers of
// power-of-two size classes, keeps the region's free lists (one per class)
// stocked for clients' ALLOCATEs, and recycles the buffers clients give
// back — safely: a returned buffer rejoins its free list only after every
// operation that might still touch it has finished (verbs.FreeLists.Quiesce),
// so a reader that followed an old pointer never sees the bytes of the
// buffer's next life. Clients give buffers back through a ReturnRing in the
// server's memory, by one-sided operations.
//
// On the client, the helpers build the post lists of PRISM's protocols
// into a caller's slice, without allocating: IndirectRead,
// AllocWriteInstall (ALLOCATE → REDIRECT, then a CONDITIONAL CAS with
// INDIRECT_ARG), CASIfGreater.
package prism

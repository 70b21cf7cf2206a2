package verbs

// MemRegistrar is implemented by a PD that can register memory the
// application already owns (ibv_reg_mr), besides allocating fresh memory
// with AllocMR. A holder of large objects registers each object in place
// for one RDMA READ instead of copying it into a registered buffer.
//
// RegMR registers buf with the given access and returns an MR whose
// Bytes is buf itself (same memory, same length) and whose Addr is the
// address of buf's first byte. buf must be non-empty, and the caller must
// keep its memory mapped and alive until Deregister returns. Deregister
// invalidates the keys, waits until no execution still uses the memory
// and leaves buf mapped and untouched: the memory stays the caller's. A
// device that cannot register foreign memory (one whose regions must live
// in memory it can share with other processes) returns an error wrapping
// ErrNotSupported.
type MemRegistrar interface {
	RegMR(buf []byte, access Access) (MR, error)
}

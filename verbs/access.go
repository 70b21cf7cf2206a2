package verbs

// Access is the set of permissions of a memory region or of a QP's
// responder (ibverbs' IBV_ACCESS_*).
type Access uint32

// Access flags.
const (
	// AccessLocalWrite lets local work requests write into the region
	// (RECV scatter, READ and atomic results).
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteWrite lets peers RDMA_WRITE into the region. Requires
	// AccessLocalWrite.
	AccessRemoteWrite
	// AccessRemoteRead lets peers RDMA_READ from the region.
	AccessRemoteRead
	// AccessRemoteAtomic lets peers run atomics on the region. Requires
	// AccessLocalWrite.
	AccessRemoteAtomic

	// AccessAll is every flag above.
	AccessAll = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

// Validate reports ErrAccess for combinations ibverbs refuses: remote
// write or remote atomic without local write, or unknown bits.
func (a Access) Validate() error {
	if a&^AccessAll != 0 {
		return ErrAccess
	}
	if a&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && a&AccessLocalWrite == 0 {
		return ErrAccess
	}
	return nil
}

// String lists the set flags, e.g. "LOCAL_WRITE|REMOTE_READ".
func (a Access) String() string {
	if a == 0 {
		return "0"
	}
	s := ""
	for _, n := range [...]struct {
		b    Access
		name string
	}{{AccessLocalWrite, "LOCAL_WRITE"}, {AccessRemoteWrite, "REMOTE_WRITE"}, {AccessRemoteRead, "REMOTE_READ"}, {AccessRemoteAtomic, "REMOTE_ATOMIC"}} {
		if a&n.b != 0 {
			if s != "" {
				s += "|"
			}
			s += n.name
		}
	}
	if a&^AccessAll != 0 {
		s += "|?"
	}
	return s
}

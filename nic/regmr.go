package nic

import (
	"fmt"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

var _ verbs.MemRegistrar = (*PD)(nil)

// RegMR implements verbs.MemRegistrar: it registers buf, memory the
// application owns, in place. The region has keys, PD accounting, the
// observer's notice and the reference counting of deregistration exactly
// as an allocated one; only its memory differs: Deregister does not unmap
// it, and a closing device leaves it alone. A node whose regions must be
// memfd-backed (Config.MemFD: peers in other processes map them) cannot
// share foreign memory and returns an error wrapping
// verbs.ErrNotSupported.
func (pd *PD) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	m, err := regMR(pd, buf, access)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// regMR is allocMR's twin for memory the application owns.
func regMR(pd *PD, buf []byte, access verbs.Access) (*MR, error) {
	if pd.node.memfd {
		return nil, fmt.Errorf("%w: RegMR on a node whose regions are memfd-shared", verbs.ErrNotSupported)
	}
	if len(buf) == 0 || uint64(len(buf)) > pd.node.attr.MaxMRSize {
		return nil, fmt.Errorf("%w: MR size %d (1 … %d)", verbs.ErrInvalidArg, len(buf), pd.node.attr.MaxMRSize)
	}
	if err := access.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", err, access)
	}
	m := &MR{
		pd:    pd,
		fd:    -1,
		owned: true,
		reg:   Region{Mem: buf[:len(buf):len(buf)], Base: uint64(uintptr(unsafe.Pointer(&buf[0]))), PD: pd.id, Access: access},
	}
	pd.node.keys.add(m)
	pd.mrs.Add(1)
	if o := pd.node.obs; o != nil {
		o.RegionAdded(m)
	}
	return m, nil
}

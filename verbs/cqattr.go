package verbs

// CQInitAttr are the attributes of CreateCQEx (ibv_create_cq_ex).
type CQInitAttr struct {
	// Depth is the number of completions the CQ holds, as CreateCQ's.
	Depth int
	// SingleThreaded promises that one goroutine at a time polls the CQ
	// (ibverbs' IBV_CREATE_CQ_ATTR_SINGLE_THREADED), so a provider may
	// poll without a lock. Two goroutines inside Poll at once is the
	// caller's bug: completions may be lost or returned twice. The race
	// detector reports it; ReqNotify, Wait, Len and Destroy may still be
	// called from any goroutine.
	SingleThreaded bool
}

// CQCreatorEx is implemented by devices that take CQInitAttr.
type CQCreatorEx interface {
	// CreateCQEx creates a completion queue with the given attributes.
	CreateCQEx(a CQInitAttr) (CQ, error)
}

// CreateCQEx creates a completion queue on dev with the given attributes:
// through the device's CreateCQEx when it has one, else through CreateCQ,
// which ignores the hints (a CQ that locks is always correct).
func CreateCQEx(dev Device, a CQInitAttr) (CQ, error) {
	if c, ok := dev.(CQCreatorEx); ok {
		return c.CreateCQEx(a)
	}
	return dev.CreateCQ(a.Depth)
}

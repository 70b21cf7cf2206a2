package replica

// SkipCopy makes the replica of jc a member at once, without copying
// anything: the recovery tests' negative control.
func SkipCopy(jc *JoinConfig) { jc.skipCopy = true }

// WriteStore writes block id of r's ABD-over-RPC store as a MethodWrite
// would: the tests' way to leave a write at chosen replicas only.
func WriteStore(r *Replica, id uint64, tag Tag, data []byte) error {
	v, err := r.volume()
	if err != nil {
		return err
	}
	_, err = v.write(id, tag, data, make([]byte, 9))
	return err
}

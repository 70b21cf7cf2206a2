package ford

// Coordinator is the id of the coordinator t runs on: the one whose log
// area its commit writes and whose id its lock words carry — what
// DB.Recover (the `txn recover` command) takes when t's client dies. It
// is t's until t commits or aborts; then another transaction of the
// client may take it.
func (t *Tx) Coordinator() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.c.id
}

package prismtx

import "context"

// phase runs one chain per key, all posted at once (one round trip):
// build fills a key's chain, take reads its result once every chain of
// the batch has answered. A transaction with more keys on one node than
// half the connection's slots runs in batches. The slots of a batch are
// acquired under db.acq: two transactions never each hold part of the
// slots the other waits for, and the slots a batch waits for are held by
// chains in flight, which give them back as they complete. On an error
// (a connection failed, ctx ended) the chains not yet answered are
// abandoned, and phase returns the first error.
func (db *DB) phase(ctx context.Context, keys []*pkey, build, take func(k *pkey, ch *chain)) error {
	limit := max(1, db.cfg.Slots/2)
	count := make([]int, len(db.conns))
	for len(keys) > 0 {
		clear(count)
		n := 0
		for ; n < len(keys) && count[keys[n].c.idx] < limit; n++ {
			count[keys[n].c.idx]++
		}
		batch := keys[:n]
		keys = keys[n:]
		if err := db.acquireAll(ctx, batch); err != nil {
			return err
		}
		for _, k := range batch {
			build(k, k.ch)
		}
		if err := runAll(ctx, batch); err != nil {
			return err
		}
		for _, k := range batch {
			take(k, k.ch)
			k.ch.release()
			k.ch = nil
		}
	}
	return nil
}

// acquireAll takes a slot for each key's chain, under db.acq.
func (db *DB) acquireAll(ctx context.Context, keys []*pkey) error {
	db.acq.Lock()
	defer db.acq.Unlock()
	for i, k := range keys {
		ch, err := k.c.acquire(ctx, listCap)
		if err != nil {
			for _, k := range keys[:i] {
				k.ch.release()
				k.ch = nil
			}
			return err
		}
		k.ch = ch
	}
	return nil
}

// runAll posts every key's chain, then waits for them all. On an error
// it releases the slots of the chains that answered; the others are
// abandoned (their slots come back as they complete, or never, on a
// failed connection).
func runAll(ctx context.Context, keys []*pkey) error {
	for i, k := range keys {
		if err := k.ch.post(); err != nil {
			for _, k := range keys[i:] {
				k.ch.release()
			}
			for _, k := range keys[:i] {
				k.ch.wait(ctx)
				k.ch.release()
			}
			return err
		}
	}
	var first error
	for _, k := range keys {
		if _, err := k.ch.wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		for _, k := range keys {
			k.ch.release() // a no-op for the abandoned ones
		}
	}
	return first
}

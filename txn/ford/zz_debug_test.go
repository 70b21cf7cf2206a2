package ford_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
)

func debugCorrupt(t *testing.T, db *ford.DB, key string) {
	ctx := tctx(t)
	for i := 0; i < 3; i++ {
		err := txn.Run(ctx, db, func(tx txn.Tx) error { _, err := tx.Get([]byte(key)); return err })
		t.Logf("re-read %s: %v", key, err)
	}
}

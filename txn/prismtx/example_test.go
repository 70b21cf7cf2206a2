package prismtx_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strconv"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// Three memory nodes (one shard each) and a client on a loop fabric: two
// accounts are created, money moves between them in a transaction, and
// a transaction that reads what another overwrote before it committed
// aborts.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var nodes []string
	for i := range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: fmt.Sprintf("loop://ptx-example/n%d", i), CM: "127.0.0.1:0",
			NewService: prismtx.Service(prismtx.NodeConfig{Slots: 1024, Memory: 4 << 20}, nil), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		nodes = append(nodes, srv.Info().CM)
	}
	db, err := prismtx.Dial(ctx, prismtx.Config{Device: "loop://ptx-example/client", Nodes: nodes})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = txn.Run(ctx, db, func(tx txn.Tx) error {
		if err := tx.Insert([]byte("alice"), []byte("100")); err != nil {
			return err
		}
		return tx.Insert([]byte("bob"), []byte("50"))
	})
	if err != nil {
		log.Fatal(err)
	}
	move := func(tx txn.Tx, from, to string, amount int) error {
		a, err := tx.Get([]byte(from))
		if err != nil {
			return err
		}
		b, err := tx.Get([]byte(to))
		if err != nil {
			return err
		}
		x, _ := strconv.Atoi(string(a))
		y, _ := strconv.Atoi(string(b))
		if err := tx.Put([]byte(from), []byte(strconv.Itoa(x-amount))); err != nil {
			return err
		}
		return tx.Put([]byte(to), []byte(strconv.Itoa(y+amount)))
	}
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { return move(tx, "alice", "bob", 30) }); err != nil {
		log.Fatal(err)
	}

	slow, _ := db.Begin(ctx)
	if err := move(slow, "bob", "alice", 10); err != nil {
		log.Fatal(err)
	}
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { return move(tx, "alice", "bob", 5) }); err != nil {
		log.Fatal(err)
	}
	err = slow.Commit()
	fmt.Println("slow transfer aborted:", errors.Is(err, txn.ErrAborted))

	tx, _ := db.Begin(ctx)
	a, _ := tx.Get([]byte("alice"))
	b, _ := tx.Get([]byte("bob"))
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("alice %s, bob %s\n", a, b)
	// Output:
	// slow transfer aborted: true
	// alice 65, bob 85
}

package workload

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/txn"
)

// TxnLoad configures a transaction workload's loader.
type TxnLoad struct {
	// Threads is the number of loading goroutines (default 4).
	Threads int
	// Batch is the number of items each load transaction writes
	// (default: about 24 records: 8 SmallBank customers of 3 records, 2
	// TATP subscribers of 10 on average, 24 YCSB-T records).
	Batch int
	// Seed seeds TATP's population: the batch starting at item i draws
	// from rand.NewSource(Seed + i), so a population does not depend on
	// Threads (default 1).
	Seed int64
	// Trace, when set, is called with every load transaction's trace, as
	// TxnRun.Trace: a checker that is handed the loaded versions knows
	// who wrote them.
	Trace func(reads, writes []txn.Access)
}

// load runs items 0 to n-1 through put, cfg.Batch (or batch) per
// transaction, from cfg.Threads goroutines.
func (cfg TxnLoad) load(ctx context.Context, db txn.DB, n, batch int, put func(tx txn.Tx, item int, r *rand.Rand) error) error {
	threads := cfg.Threads
	if threads <= 0 {
		threads = 4
	}
	if cfg.Batch > 0 {
		batch = cfg.Batch
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &probe{db: db, trace: cfg.Trace}
			r := rand.New(rand.NewSource(seed))
			for {
				first := int(next.Add(int64(batch))) - batch
				if first >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[t] = fmt.Errorf("workload: loading: %w", err)
					return
				}
				last := min(first+batch, n)
				err := txn.Run(ctx, p, func(tx txn.Tx) error {
					r.Seed(seed + int64(first))
					for i := first; i < last; i++ {
						if err := put(tx, i, r); err != nil {
							return err
						}
					}
					return nil
				})
				if err == nil {
					err = p.err
				}
				if err != nil {
					errs[t] = fmt.Errorf("workload: loading items %d to %d: %w", first, last-1, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Load writes the bank: for every customer its account (name) and its
// savings and checking balances, InitialBalance each.
func (s *SmallBank) Load(ctx context.Context, db txn.DB, cfg TxnLoad) error {
	bal := binary.BigEndian.AppendUint64(nil, uint64(s.Initial()))
	return cfg.load(ctx, db, s.NumAccounts(), 8, func(tx txn.Tx, i int, _ *rand.Rand) error {
		id := uint64(i)
		if err := tx.Put(AccountKey(id), AccountName(id)); err != nil {
			return err
		}
		if err := tx.Put(SavingsKey(id), bal); err != nil {
			return err
		}
		return tx.Put(CheckingKey(id), bal)
	})
}

// Total reads every savings and checking balance back through db and
// returns their sum. It reads in many transactions: run it when no
// other transaction runs.
func (s *SmallBank) Total(ctx context.Context, db txn.DB) (int64, error) {
	const batch = 32
	var total int64
	for first := 0; first < s.NumAccounts(); first += batch {
		var sum int64
		err := txn.Run(ctx, db, func(tx txn.Tx) error {
			sum = 0
			for id := uint64(first); id < uint64(min(first+batch, s.NumAccounts())); id++ {
				for _, key := range [][]byte{SavingsKey(id), CheckingKey(id)} {
					v, err := getInt64(tx, key)
					if err != nil {
						return err
					}
					sum += v
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("workload: reading SmallBank balances: %w", err)
		}
		total += sum
	}
	return total, nil
}

// MoneyError says the bank's money is not what the committed
// transactions left.
type MoneyError struct {
	Total int64 // read back
	Want  int64 // initial total plus the committed deltas
	// Unknown is the run's transactions of unknown outcome: each may
	// explain part of the difference.
	Unknown int64
}

// Error says by how much.
func (e *MoneyError) Error() string {
	s := fmt.Sprintf("workload: SmallBank holds %d, want %d (initial + committed deposits − withdrawals): off by %d",
		e.Total, e.Want, e.Total-e.Want)
	if e.Unknown > 0 {
		s += fmt.Sprintf(" (%d transactions of unknown outcome)", e.Unknown)
	}
	return s
}

// CheckMoney checks SmallBank's invariant after runs on a freshly loaded
// bank: the money it holds (Total) is the initial total plus the deltas
// of the runs' committed transactions (deposits minus withdrawals,
// WriteCheck's penalties included; Amalgamate and SendPayment move
// money inside the bank). It returns a *MoneyError when it does not
// hold.
func (s *SmallBank) CheckMoney(ctx context.Context, db txn.DB, runs ...*TxnResult) error {
	got, err := s.Total(ctx, db)
	if err != nil {
		return err
	}
	want := s.InitialTotal()
	var unknown int64
	for _, r := range runs {
		want += r.Delta
		unknown += r.Unknown
	}
	if got != want {
		return &MoneyError{Total: got, Want: want, Unknown: unknown}
	}
	return nil
}

// Load writes the population of subscribers 1 to Subscribers (Rows).
func (t *TATP) Load(ctx context.Context, db txn.DB, cfg TxnLoad) error {
	return cfg.load(ctx, db, t.NumSubscribers(), 2, func(tx txn.Tx, i int, r *rand.Rand) error {
		return t.put(tx, t.Rows(uint64(i)+1, r))
	})
}

// put writes one subscriber's rows.
func (t *TATP) put(tx txn.Tx, rows TATPRows) error {
	sid := rows.SID
	if err := tx.Put(TATPSubscriberKey(sid), rows.Subscriber.Append(nil)); err != nil {
		return err
	}
	for ai, a := range rows.AccessInfo {
		if err := tx.Put(TATPAccessInfoKey(sid, ai), a.Append(nil)); err != nil {
			return err
		}
	}
	for sf, f := range rows.SpecialFacilities {
		if err := tx.Put(TATPSpecialFacilityKey(sid, sf), f.Append(nil)); err != nil {
			return err
		}
		for start, cf := range rows.CallForwarding[sf] {
			if err := tx.Put(TATPCallForwardingKey(sid, sf, start), cf.Append(nil)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Load writes records 0 to Keys-1, each with counter 0.
func (y *YCSBT) Load(ctx context.Context, db txn.DB, cfg TxnLoad) error {
	if err := y.Validate(); err != nil {
		return err
	}
	val := make([]byte, y.Size())
	for i := 8; i < len(val); i++ {
		val[i] = byte(i)
	}
	return cfg.load(ctx, db, int(y.NumKeys()), 24, func(tx txn.Tx, i int, _ *rand.Rand) error {
		return tx.Put(YCSBTKey(uint64(i)), val)
	})
}

package peers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rdmakit/rdmakit/workload"
)

// PGSmallBank is SmallBank on PostgreSQL as its users write it: the
// tables accounts (custid → name), savings and checking (custid →
// balance, in cents), and each of the six transactions in SQL at
// SERIALIZABLE isolation on a PGTxn, running the same operations
// (workload.SmallBankOp) the workload draws for rdmakit's protocols.
type PGSmallBank struct {
	db *PGTxn
	w  *workload.SmallBank
}

// smallBankSchema makes the tables, without their foreign keys (added
// after loading, as a bulk load does).
var smallBankSchema = []string{
	"DROP TABLE IF EXISTS checking, savings, accounts",
	"CREATE TABLE accounts (custid bigint PRIMARY KEY, name varchar(64) NOT NULL)",
	"CREATE TABLE savings (custid bigint PRIMARY KEY, bal bigint NOT NULL)",
	"CREATE TABLE checking (custid bigint PRIMARY KEY, bal bigint NOT NULL)",
}

// smallBankKeys are the foreign keys and statistics, after loading.
var smallBankKeys = []string{
	"ALTER TABLE savings ADD FOREIGN KEY (custid) REFERENCES accounts",
	"ALTER TABLE checking ADD FOREIGN KEY (custid) REFERENCES accounts",
	"ANALYZE accounts, savings, checking",
}

// sbWriteCheckPenalty is WriteCheck's penalty in cents, as the workload
// takes it (it does not export it; TestPGSmallBank/like-for-like compares).
const sbWriteCheckPenalty = 1

// SmallBank's statements. A transaction that updates two checking rows
// updates them in the order of their custid, as a PostgreSQL user does to
// keep two such transactions from deadlocking (the server finds a
// deadlock only after deadlock_timeout, a second); savings rows are
// updated before checking rows.
const (
	sbBalances = "SELECT s.bal, c.bal FROM savings s JOIN checking c ON c.custid = s.custid WHERE s.custid = $1"
	sbChecking = "SELECT bal FROM checking WHERE custid = $1"
	sbAddChk   = "UPDATE checking SET bal = bal + $2 WHERE custid = $1"
	sbAddSav   = "UPDATE savings SET bal = bal + $2 WHERE custid = $1"
	sbZeroChk  = "UPDATE checking SET bal = 0 WHERE custid = $1"
	sbZeroSav  = "UPDATE savings SET bal = 0 WHERE custid = $1"
)

// LoadPGSmallBank makes SmallBank's tables on db's server (dropping
// earlier ones) and loads w's population with COPY: every customer with
// w.Initial() in savings and in checking.
func LoadPGSmallBank(ctx context.Context, db *PGTxn, w *workload.SmallBank) (*PGSmallBank, error) {
	if err := execAll(ctx, db, smallBankSchema); err != nil {
		return nil, fmt.Errorf("smallbank: schema: %w", err)
	}
	n := w.NumAccounts()
	tables := []struct {
		name string
		cols []string
		row  func(id int64) []any
	}{
		{"accounts", []string{"custid", "name"}, func(id int64) []any { return []any{id, string(workload.AccountName(uint64(id)))} }},
		{"savings", []string{"custid", "bal"}, func(id int64) []any { return []any{id, w.Initial()} }},
		{"checking", []string{"custid", "bal"}, func(id int64) []any { return []any{id, w.Initial()} }},
	}
	for _, t := range tables {
		rows := pgx.CopyFromSlice(n, func(i int) ([]any, error) { return t.row(int64(i)), nil })
		got, err := db.pool.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, rows)
		if err != nil {
			return nil, fmt.Errorf("smallbank: copy %s: %w", t.name, err)
		}
		if got != int64(n) {
			return nil, fmt.Errorf("smallbank: copy %s: %d rows of %d", t.name, got, n)
		}
	}
	if err := execAll(ctx, db, smallBankKeys); err != nil {
		return nil, fmt.Errorf("smallbank: keys: %w", err)
	}
	return &PGSmallBank{db: db, w: w}, nil
}

// Exec runs op in a SERIALIZABLE transaction (Balance, DepositChecking
// and TransactSavings are one statement each, sent alone), again while
// the server aborts it (each abort counted in s, which may be nil), and
// returns the
// money it added to the bank (as workload.SmallBank's Exec: negative
// when taken out). A SendPayment without the funds is rolled back and
// returns an error wrapping workload.ErrRejected. Exec is a
// workload.TxnExec: workload.RunTxnFunc runs it.
func (b *PGSmallBank) Exec(ctx context.Context, s *workload.TxnSession, op workload.SmallBankOp) (int64, error) {
	if op.Kind > workload.WriteCheck || op.Amount < 0 || (op.Kind == workload.Amalgamate || op.Kind == workload.SendPayment) && op.Cust1 == op.Cust2 {
		return 0, fmt.Errorf("smallbank: operation %+v is not one the workload draws", op)
	}
	c1, c2 := int64(op.Cust1), int64(op.Cust2)
	var delta int64
	sh := statements
	switch op.Kind {
	case workload.Balance, workload.DepositChecking, workload.TransactSavings:
		sh = oneStatement
	}
	err := b.db.run(ctx, s, sh, func(tx querier) error {
		delta = 0
		switch op.Kind {
		case workload.Amalgamate:
			return amalgamateSQL(ctx, tx, c1, c2)
		case workload.Balance:
			_, _, err := balancesSQL(ctx, tx, c1)
			return err
		case workload.DepositChecking:
			delta = op.Amount
			return execBatch(ctx, tx, st(sbAddChk, c1, op.Amount))
		case workload.SendPayment:
			return sendPaymentSQL(ctx, tx, c1, c2, op.Amount)
		case workload.TransactSavings:
			delta = op.Amount
			return execBatch(ctx, tx, st(sbAddSav, c1, op.Amount))
		default: // WriteCheck
			var err error
			delta, err = writeCheckSQL(ctx, tx, c1, op.Amount)
			return err
		}
	})
	if err != nil {
		return 0, fmt.Errorf("smallbank: %v: %w", op.Kind, err)
	}
	return delta, nil
}

// balancesSQL reads a customer's savings and checking balances.
func balancesSQL(ctx context.Context, tx querier, cust int64) (sav, chk int64, err error) {
	err = tx.QueryRow(ctx, sbBalances, cust).Scan(&sav, &chk)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("%w: customer %d", ErrPGMissingRow, cust)
	}
	return sav, chk, err
}

// amalgamateSQL moves customer 1's savings and checking into customer
// 2's checking.
func amalgamateSQL(ctx context.Context, tx querier, c1, c2 int64) error {
	sav, chk, err := balancesSQL(ctx, tx, c1)
	if err != nil {
		return err
	}
	zero, add := st(sbZeroChk, c1), st(sbAddChk, c2, sav+chk)
	if c2 < c1 {
		zero, add = add, zero
	}
	return execBatch(ctx, tx, st(sbZeroSav, c1), zero, add)
}

// sendPaymentSQL moves amount between checking balances if the payer
// has it.
func sendPaymentSQL(ctx context.Context, tx querier, c1, c2, amount int64) error {
	var chk int64
	err := tx.QueryRow(ctx, sbChecking, c1).Scan(&chk)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: customer %d", ErrPGMissingRow, c1)
	}
	if err != nil {
		return err
	}
	if chk < amount {
		return fmt.Errorf("%w: checking of %d holds %d, the payment is %d", workload.ErrRejected, c1, chk, amount)
	}
	take, give := st(sbAddChk, c1, -amount), st(sbAddChk, c2, amount)
	if c2 < c1 {
		take, give = give, take
	}
	return execBatch(ctx, tx, take, give)
}

// writeCheckSQL takes amount from checking, and one cent more when
// savings and checking together hold less, and returns minus what it
// took.
func writeCheckSQL(ctx context.Context, tx querier, cust, amount int64) (int64, error) {
	sav, chk, err := balancesSQL(ctx, tx, cust)
	if err != nil {
		return 0, err
	}
	take := amount
	if sav+chk < amount {
		take += sbWriteCheckPenalty
	}
	return -take, execBatch(ctx, tx, st(sbAddChk, cust, -take))
}

// Total returns the money in the bank: every savings and checking
// balance added up.
func (b *PGSmallBank) Total(ctx context.Context) (int64, error) {
	var total int64
	err := b.db.pool.QueryRow(ctx, "SELECT ((SELECT coalesce(sum(bal), 0) FROM savings) + (SELECT coalesce(sum(bal), 0) FROM checking))::bigint").Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("smallbank: total: %w", err)
	}
	return total, nil
}

// CheckMoney checks SmallBank's invariant after runs on a freshly loaded
// bank, as workload.SmallBank.CheckMoney does on a txn.DB: the money in
// the bank (Total) is the initial total plus the runs' committed deltas
// (deposits minus withdrawals). It returns a *workload.MoneyError when
// it does not hold. Run it when no transaction runs.
func (b *PGSmallBank) CheckMoney(ctx context.Context, runs ...*workload.TxnResult) error {
	total, err := b.Total(ctx)
	if err != nil {
		return err
	}
	want := b.w.InitialTotal()
	var unknown int64
	for _, r := range runs {
		want += r.Delta
		unknown += r.Unknown
	}
	if total != want {
		return &workload.MoneyError{Total: total, Want: want, Unknown: unknown}
	}
	return nil
}

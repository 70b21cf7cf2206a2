package workload

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/rdmakit/rdmakit/txn"
)

// SmallBank is the SmallBank banking workload (Alomari et al., ICDE'08,
// as H-Store, OLTPBench and DrTM run it), in the form FORD and Smart-DTX
// evaluate (their smallbank config: 100,000 accounts, 4,000 hot ones,
// TX_HOT = 90, so 90% of transactions use hot accounts only; the mix
// Amalgamate 15%, Balance 15%, DepositChecking 15%, SendPayment 25%,
// TransactSavings 15%, WriteCheck 15%; spec/anchors-apps.md §(c)). As in
// FORD, the transactions touch the savings and checking tables; the
// accounts table (customer id → name) is loaded with them, so that a SQL
// peer holds the same three tables.
//
// Records are txn keys "sb.acct/<id>", "sb.sav/<id>" and "sb.chk/<id>"
// (customers 0 to Accounts-1); a balance is an 8-byte big-endian signed
// integer (money in cents), a name 16 ASCII digits. The zero SmallBank
// is the standard configuration.
type SmallBank struct {
	// Accounts is the number of customers (default 100,000).
	Accounts int
	// HotAccounts is the number of hot customers, ids 0 to HotAccounts-1
	// (default 4,000; at most Accounts).
	HotAccounts int
	// HotPercent is the share of transactions, in percent, whose
	// customers are all hot (default 90; negative for none).
	HotPercent int
	// InitialBalance is every savings and every checking balance when
	// loaded, in cents (default 1,000,000).
	InitialBalance int64
}

// SmallBankKind is a SmallBank transaction.
type SmallBankKind uint8

// SmallBank's six transactions.
const (
	// Amalgamate moves all of Cust1's money (savings and checking) into
	// Cust2's checking account.
	Amalgamate SmallBankKind = iota
	// Balance reads Cust1's savings and checking balances (read-only).
	Balance
	// DepositChecking adds Amount to Cust1's checking balance.
	DepositChecking
	// SendPayment moves Amount from Cust1's checking to Cust2's; it is
	// rejected when Cust1's checking balance is below Amount.
	SendPayment
	// TransactSavings adds Amount to Cust1's savings balance.
	TransactSavings
	// WriteCheck takes Amount from Cust1's checking balance, and a
	// penalty of one cent more when savings and checking together hold
	// less than Amount.
	WriteCheck
	numSmallBankKinds
)

// smallBankNames are the kinds' names, as the literature spells them.
var smallBankNames = []string{"Amalgamate", "Balance", "DepositChecking", "SendPayment", "TransactSavings", "WriteCheck"}

// String names the transaction.
func (k SmallBankKind) String() string {
	if int(k) < len(smallBankNames) {
		return smallBankNames[k]
	}
	return fmt.Sprintf("SmallBankKind(%d)", uint8(k))
}

// smallBankMix is the cumulative mix in percent, in kind order.
var smallBankMix = [numSmallBankKinds]int{15, 30, 45, 70, 85, 100}

// The amounts of FORD's transactions (1.3, 5.0, 20.20 and 5.0 units),
// in cents.
const (
	depositCheckingAmount = 130
	sendPaymentAmount     = 500
	transactSavingsAmount = 2020
	writeCheckAmount      = 500
	writeCheckPenalty     = 1
)

// SmallBankOp is one drawn SmallBank transaction: everything it does.
type SmallBankOp struct {
	Kind SmallBankKind
	// Cust1 is the customer every transaction reads or writes; Cust2
	// the second customer of Amalgamate and SendPayment (different from
	// Cust1), 0 for the others.
	Cust1, Cust2 uint64
	// Amount is the money DepositChecking, SendPayment, TransactSavings
	// and WriteCheck move, in cents (positive); 0 for the others.
	Amount int64
}

// SmallBank's table names: each record's key is the table, a slash and
// the customer id.
const (
	SmallBankAccounts = "sb.acct"
	SmallBankSavings  = "sb.sav"
	SmallBankChecking = "sb.chk"
)

// SavingsKey returns the key of customer id's savings balance.
func SavingsKey(id uint64) []byte { return appendKey(nil, SmallBankSavings, id) }

// CheckingKey returns the key of customer id's checking balance.
func CheckingKey(id uint64) []byte { return appendKey(nil, SmallBankChecking, id) }

// AccountKey returns the key of customer id's account (its name).
func AccountKey(id uint64) []byte { return appendKey(nil, SmallBankAccounts, id) }

// AccountName is customer id's name in the accounts table: its id in 16
// decimal digits.
func AccountName(id uint64) []byte { return fmt.Appendf(nil, "%016d", id) }

// NumAccounts returns the number of customers (Accounts, or its default).
func (s *SmallBank) NumAccounts() int {
	if s.Accounts > 0 {
		return s.Accounts
	}
	return 100_000
}

// NumHot returns the number of hot customers.
func (s *SmallBank) NumHot() int {
	if s.HotAccounts > 0 {
		return min(s.HotAccounts, s.NumAccounts())
	}
	return min(4_000, s.NumAccounts())
}

// hotPercent returns the share of transactions on hot customers.
func (s *SmallBank) hotPercent() int {
	switch {
	case s.HotPercent < 0:
		return 0
	case s.HotPercent == 0:
		return 90
	}
	return min(s.HotPercent, 100)
}

// Initial returns every savings and checking balance as loaded.
func (s *SmallBank) Initial() int64 {
	if s.InitialBalance > 0 {
		return s.InitialBalance
	}
	return 1_000_000
}

// InitialTotal returns the money in the bank once loaded: two balances
// per customer.
func (s *SmallBank) InitialTotal() int64 { return 2 * int64(s.NumAccounts()) * s.Initial() }

// Kinds names SmallBank's transactions, in SmallBankKind order.
func (s *SmallBank) Kinds() []string { return smallBankNames }

// KindOf returns op's kind as an index in Kinds.
func (s *SmallBank) KindOf(op SmallBankOp) int { return int(op.Kind) }

// Next draws a transaction by the standard mix; with probability
// HotPercent its customers are drawn among the hot ones, otherwise among
// all (uniformly, as FORD does).
func (s *SmallBank) Next(r *rand.Rand) SmallBankOp {
	p := r.Intn(100)
	var op SmallBankOp
	for k, c := range smallBankMix {
		if p < c {
			op.Kind = SmallBankKind(k)
			break
		}
	}
	n := s.NumAccounts()
	if r.Intn(100) < s.hotPercent() {
		n = s.NumHot()
	}
	op.Cust1 = uint64(r.Intn(n))
	switch op.Kind {
	case Amalgamate, SendPayment:
		if n < 2 {
			n = s.NumAccounts()
		}
		if n < 2 {
			break // a bank of one customer: Exec refuses the operation
		}
		op.Cust2 = uint64(r.Intn(n - 1))
		if op.Cust2 >= op.Cust1 {
			op.Cust2++
		}
	}
	switch op.Kind {
	case DepositChecking:
		op.Amount = depositCheckingAmount
	case SendPayment:
		op.Amount = sendPaymentAmount
	case TransactSavings:
		op.Amount = transactSavingsAmount
	case WriteCheck:
		op.Amount = writeCheckAmount
	}
	return op
}

// Exec runs op on db (txn.Run: retried until it commits) and returns the
// money it added to the bank (negative: taken out): DepositChecking's and
// TransactSavings' Amount, WriteCheck's Amount and penalty taken, 0 for
// the transactions that move money inside the bank. A SendPayment
// without the funds returns an error wrapping ErrRejected.
func (s *SmallBank) Exec(ctx context.Context, db txn.DB, op SmallBankOp) (int64, error) {
	if op.Kind >= numSmallBankKinds || op.Amount < 0 || (op.Kind == Amalgamate || op.Kind == SendPayment) && op.Cust1 == op.Cust2 {
		return 0, fmt.Errorf("workload: SmallBank operation %+v is not one Next draws", op)
	}
	// One buffer for the keys: the transaction may keep them until it ends.
	buf := make([]byte, 0, 4*24)
	sav1 := appendKey(buf, SmallBankSavings, op.Cust1)
	chk1 := appendKey(sav1[len(sav1):], SmallBankChecking, op.Cust1)
	chk2 := appendKey(chk1[len(chk1):], SmallBankChecking, op.Cust2)
	var delta int64
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		delta = 0
		switch op.Kind {
		case Amalgamate:
			return amalgamate(tx, sav1, chk1, chk2)
		case Balance:
			if _, err := getInt64(tx, sav1); err != nil {
				return err
			}
			_, err := getInt64(tx, chk1)
			return err
		case DepositChecking:
			delta = op.Amount
			return addInt64(tx, chk1, op.Amount)
		case SendPayment:
			return sendPayment(tx, chk1, chk2, op.Amount)
		case TransactSavings:
			delta = op.Amount
			return addInt64(tx, sav1, op.Amount)
		default: // WriteCheck
			var err error
			delta, err = writeCheck(tx, sav1, chk1, op.Amount)
			return err
		}
	})
	if err != nil {
		return 0, fmt.Errorf("workload: SmallBank %v: %w", op.Kind, err)
	}
	return delta, nil
}

// addInt64 adds n to the integer record at key.
func addInt64(tx txn.Tx, key []byte, n int64) error {
	v, err := getInt64(tx, key)
	if err != nil {
		return err
	}
	return putInt64(tx, key, v+n)
}

// amalgamate moves customer 1's savings and checking into customer 2's
// checking.
func amalgamate(tx txn.Tx, sav1, chk1, chk2 []byte) error {
	s1, err := getInt64(tx, sav1)
	if err != nil {
		return err
	}
	c1, err := getInt64(tx, chk1)
	if err != nil {
		return err
	}
	c2, err := getInt64(tx, chk2)
	if err != nil {
		return err
	}
	if err := putInt64(tx, chk2, c2+s1+c1); err != nil {
		return err
	}
	if err := putInt64(tx, sav1, 0); err != nil {
		return err
	}
	return putInt64(tx, chk1, 0)
}

// sendPayment moves amount between checking balances, if the payer has it.
func sendPayment(tx txn.Tx, chk1, chk2 []byte, amount int64) error {
	c1, err := getInt64(tx, chk1)
	if err != nil {
		return err
	}
	if c1 < amount {
		return fmt.Errorf("%w: checking %s holds %d, the payment is %d", ErrRejected, chk1, c1, amount)
	}
	c2, err := getInt64(tx, chk2)
	if err != nil {
		return err
	}
	if err := putInt64(tx, chk1, c1-amount); err != nil {
		return err
	}
	return putInt64(tx, chk2, c2+amount)
}

// writeCheck takes amount from checking (and the penalty if savings and
// checking together hold less) and returns minus what it took.
func writeCheck(tx txn.Tx, sav, chk []byte, amount int64) (int64, error) {
	s, err := getInt64(tx, sav)
	if err != nil {
		return 0, err
	}
	c, err := getInt64(tx, chk)
	if err != nil {
		return 0, err
	}
	take := amount
	if s+c < amount {
		take += writeCheckPenalty
	}
	return -take, putInt64(tx, chk, c-take)
}

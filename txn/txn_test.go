package txn

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeDB hands out transactions whose Commit aborts the first fails
// times.
type fakeDB struct {
	fails   int
	commits int
	begins  int
}

type fakeTx struct{ db *fakeDB }

func (d *fakeDB) Begin(context.Context) (Tx, error) { d.begins++; return fakeTx{d}, nil }
func (d *fakeDB) Close() error                      { return nil }

func (t fakeTx) Get([]byte) ([]byte, error) { return nil, ErrNotFound }
func (t fakeTx) Put(_, _ []byte) error      { return nil }
func (t fakeTx) Insert(_, _ []byte) error   { return nil }
func (t fakeTx) Delete([]byte) error        { return nil }
func (t fakeTx) Abort()                     {}
func (t fakeTx) Commit() error {
	if t.db.fails > 0 {
		t.db.fails--
		return Abort(LockConflict, []byte("k"), nil)
	}
	t.db.commits++
	return nil
}

func TestRunRetriesAborts(t *testing.T) {
	db := &fakeDB{fails: 5}
	if err := Run(context.Background(), db, func(Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if db.begins != 6 || db.commits != 1 {
		t.Fatalf("begins %d commits %d, want 6 and 1", db.begins, db.commits)
	}
}

func TestRunReturnsUserErrors(t *testing.T) {
	db := &fakeDB{}
	mine := errors.New("insufficient funds")
	if err := Run(context.Background(), db, func(Tx) error { return mine }); err != mine {
		t.Fatalf("err %v, want the function's", err)
	}
	err := Run(context.Background(), db, func(Tx) error { return Abort(UserAbort, nil, nil) })
	if ReasonOf(err) != UserAbort || db.begins != 2 {
		t.Fatalf("user abort: err %v after %d begins, want no retry", err, db.begins)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	db := &fakeDB{fails: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := Run(ctx, db, func(Tx) error { return nil })
	if !errors.Is(err, ErrAborted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the abort and the deadline", err)
	}
	if ReasonOf(err) != LockConflict {
		t.Fatalf("reason %v, want lock-conflict", ReasonOf(err))
	}
}

func TestAbortError(t *testing.T) {
	cause := context.Canceled
	err := error(Abort(Timeout, []byte("acct/7"), cause))
	if !errors.Is(err, ErrAborted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v: not an abort wrapping its cause", err)
	}
	if got, want := err.Error(), `txn: aborted: timeout on key "acct/7": context canceled`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if ReasonOf(errors.New("x")) != 0 {
		t.Fatal("a plain error has a reason")
	}
}

func TestCheckAndShard(t *testing.T) {
	if Check(nil, nil) == nil || Check(make([]byte, MaxKey+1), nil) == nil || Check([]byte("k"), make([]byte, MaxValue+1)) == nil {
		t.Fatal("out-of-limits key or value accepted")
	}
	if err := Check(make([]byte, MaxKey), make([]byte, MaxValue)); err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 3)
	for i := range 3000 {
		counts[Shard([]byte{byte(i), byte(i >> 8), 'k'}, 3)]++
	}
	for s, c := range counts {
		if c < 800 {
			t.Fatalf("shard %d holds %d of 3000 keys", s, c)
		}
	}
}

package verbs

import (
	"errors"
	"testing"
)

// roomyQP accepts at most room requests per post until progress frees
// more: a send queue that fills up.
type roomyQP struct {
	QP
	room   int
	posted []uint64
	fail   error
}

func (q *roomyQP) PostSend(wrs []SendWR) error {
	if q.fail != nil {
		return &PostError{Index: 0, Err: q.fail}
	}
	for i, w := range wrs {
		if q.room == 0 {
			return &PostError{Index: i, Err: ErrQueueFull}
		}
		q.room--
		q.posted = append(q.posted, w.ID)
	}
	return nil
}

func TestPostAll(t *testing.T) {
	wrs := make([]SendWR, 10)
	for i := range wrs {
		wrs[i].ID = uint64(i)
	}
	q := &roomyQP{room: 3}
	polls := 0
	progress := func() int { polls++; q.room += 2; return 2 }
	if err := PostAll(q, wrs, progress, nil); err != nil {
		t.Fatal(err)
	}
	if len(q.posted) != 10 {
		t.Fatalf("posted %v, want all 10 once", q.posted)
	}
	for i, id := range q.posted {
		if id != uint64(i) {
			t.Fatalf("posted %v: out of order or twice", q.posted)
		}
	}
	if polls == 0 {
		t.Error("a full queue did not poll for progress")
	}

	// A queue that never frees up: PostAll gives up once done closes.
	q = &roomyQP{room: 1}
	done := make(chan struct{})
	close(done)
	err := PostAll(q, wrs, func() int { return 0 }, done)
	if !errors.Is(err, ErrQueueFull) || len(q.posted) != 1 {
		t.Fatalf("err %v after posting %d, want ErrQueueFull after 1", err, len(q.posted))
	}

	// Any other rejection comes back at once.
	q = &roomyQP{room: 5, fail: ErrInvalidArg}
	if err := PostAll(q, wrs, func() int { t.Error("progress called"); return 0 }, nil); !errors.Is(err, ErrInvalidArg) {
		t.Fatalf("err %v, want ErrInvalidArg", err)
	}
}

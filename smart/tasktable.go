package smart

import (
	"sync"
	"sync/atomic"
)

// taskTable maps task ids to tasks for the pollers: a slice indexed by
// id, copied on write (tasks are made rarely and reused) so that a
// completion's lookup is one atomic load and an index, no lock and no
// hashing.
type taskTable struct {
	mu  sync.Mutex // writers
	tab atomic.Pointer[[]*Task]
}

// load returns task id's task, nil if none.
func (tt *taskTable) load(id uint32) *Task {
	p := tt.tab.Load()
	if p == nil || int(id) >= len(*p) {
		return nil
	}
	return (*p)[id]
}

// store adds t under t.id.
func (tt *taskTable) store(t *Task) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	var old []*Task
	if p := tt.tab.Load(); p != nil {
		old = *p
	}
	next := make([]*Task, max(len(old), int(t.id)+1))
	copy(next, old)
	next[t.id] = t
	tt.tab.Store(&next)
}

// remove drops task id.
func (tt *taskTable) remove(id uint32) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	p := tt.tab.Load()
	if p == nil || int(id) >= len(*p) {
		return
	}
	next := append([]*Task(nil), *p...)
	next[id] = nil
	tt.tab.Store(&next)
}

// all returns every task stored.
func (tt *taskTable) all() []*Task {
	p := tt.tab.Load()
	if p == nil {
		return nil
	}
	var out []*Task
	for _, t := range *p {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

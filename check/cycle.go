package check

// Budgets of edges the searches for a short cycle visit, all together:
// a few hundred milliseconds at most on a history of millions.
const (
	twoCycleBudget   = 1 << 25
	shortCycleBudget = 1 << 21
)

// findCycle returns a cycle of the graph and the number of strongly
// connected components with a cycle, or nil and 0: the components
// (cyclicComponents), then a cycle of two transactions from any of them
// if one turns up within a budget (a lost update, a write skew: the
// anomaly itself rather than a long path through the transactions that
// happened around it), else a short cycle of the first (shortCycle).
func (g *graph) findCycle() ([]Dep, int) {
	comps := g.cyclicComponents()
	if len(comps) == 0 {
		return nil, 0
	}
	n := len(g.start) - 1
	f := &cycleFinder{g: g, comp: make([]int32, n), seen: make([]int32, n), prev: make([]step, n)}
	for i, comp := range comps {
		for _, v := range comp {
			f.comp[v] = int32(i) + 1
		}
	}
	budget := twoCycleBudget
	for i, comp := range comps {
		if c := f.twoCycle(comp, int32(i)+1, &budget); c != nil {
			return c, len(comps)
		}
	}
	return f.shortCycle(comps[0], 1), len(comps)
}

// cycleFinder searches the cyclic components for short cycles.
type cycleFinder struct {
	g    *graph
	comp []int32 // node → its cyclic component's number + 1, 0 for none
	// Breadth-first searches: seen[v] is the number of the last search
	// that reached v, prev[v] how it did.
	seen   []int32
	prev   []step
	search int32
}

// step is how a breadth-first search reached a node.
type step struct {
	from int32
	kind DepKind
}

// twoCycle returns a cycle of two transactions of component id (its
// nodes comp), or nil if it found none within the budget.
func (f *cycleFinder) twoCycle(comp []int32, id int32, budget *int) []Dep {
	g := f.g
	for _, u := range comp {
		for e := g.start[u]; e < g.start[u+1]; e++ {
			w := g.to[e]
			if f.comp[w] != id {
				continue
			}
			for b := g.start[w]; b < g.start[w+1]; b++ {
				if g.to[b] == u {
					return []Dep{{From: int(u), To: int(w), Kind: g.kind[e]}, {From: int(w), To: int(u), Kind: g.kind[b]}}
				}
			}
			if *budget -= int(g.start[w+1]-g.start[w]) + 1; *budget <= 0 {
				return nil
			}
		}
	}
	return nil
}

// shortCycle returns a short cycle of component id (its nodes comp): the
// shortest of the cycles through each of its nodes in turn (each by a
// breadth-first search inside the component, cut at the length of the
// best so far), until the searches after the first have visited
// shortCycleBudget edges. The first search always finishes: every node
// of a component lies on a cycle.
func (f *cycleFinder) shortCycle(comp []int32, id int32) []Dep {
	unbounded := len(f.g.to) + 1
	best := f.shortestCycle(comp[0], id, len(comp), &unbounded)
	budget := shortCycleBudget
	for _, v := range comp[1:] {
		if len(best) <= 2 || budget <= 0 {
			break
		}
		if c := f.shortestCycle(v, id, len(best)-1, &budget); c != nil {
			best = c
		}
	}
	return best
}

// shortestCycle returns the shortest cycle through v of at most limit
// edges inside component id, or nil if it has none or the budget ran out
// first.
func (f *cycleFinder) shortestCycle(v, id int32, limit int, budget *int) []Dep {
	g := f.g
	f.search++
	level := []int32{v}
	for depth := 1; depth <= limit && len(level) > 0; depth++ {
		var next []int32
		for _, u := range level {
			for e := g.start[u]; e < g.start[u+1]; e++ {
				w := g.to[e]
				if f.comp[w] != id || f.seen[w] == f.search {
					continue
				}
				f.seen[w], f.prev[w] = f.search, step{u, g.kind[e]}
				if w == v {
					return f.unwind(v)
				}
				next = append(next, w)
			}
			if *budget -= int(g.start[u+1] - g.start[u]); *budget <= 0 {
				return nil
			}
		}
		level = next
	}
	return nil
}

// unwind follows the last search's steps back from v to v.
func (f *cycleFinder) unwind(v int32) []Dep {
	var rev []Dep
	for w := v; ; {
		s := f.prev[w]
		rev = append(rev, Dep{From: int(s.from), To: int(w), Kind: s.kind})
		if w = s.from; w == v {
			break
		}
	}
	out := make([]Dep, len(rev))
	for i, d := range rev {
		out[len(rev)-1-i] = d
	}
	return out
}

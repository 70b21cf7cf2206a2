package check

import "slices"

// findCycle returns a cycle of the graph and the number of strongly
// connected components with a cycle, or nil and 0: Tarjan's algorithm,
// run with an explicit stack; then a cycle of two transactions from any
// component, if one is found within the budget, or else a short cycle
// of the first component (shortCycle).
func (g *graph) findCycle() ([]Dep, int) {
	comps := g.cyclicComponents()
	if len(comps) == 0 {
		return nil, 0
	}
	budget := cycleSearchBudget
	for _, comp := range comps {
		if c := g.twoCycle(comp, members(comp), &budget); c != nil {
			return c, len(comps)
		}
	}
	return g.shortCycle(comps[0]), len(comps)
}

// members returns the set of comp's nodes.
func members(comp []int32) map[int32]bool {
	in := make(map[int32]bool, len(comp))
	for _, w := range comp {
		in[w] = true
	}
	return in
}

// cyclicComponents returns the strongly connected components of more
// than one transaction (Tarjan's algorithm with an explicit stack).
func (g *graph) cyclicComponents() [][]int32 {
	var comps [][]int32
	n := len(g.start) - 1
	const unvisited = -1
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = unvisited
	}
	var stack []int32 // Tarjan's stack of visited nodes
	type frame struct {
		node int32
		edge int32 // the next edge of node to follow
	}
	var calls []frame // the depth-first search, in place of recursion
	next := int32(0)
	for root := range int32(n) {
		if index[root] != unvisited {
			continue
		}
		calls = append(calls[:0], frame{root, g.start[root]})
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.node
			if f.edge < g.start[v+1] {
				w := g.to[f.edge]
				f.edge++
				switch {
				case index[w] == unvisited:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, g.start[w]})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].node
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			// v roots a component: the nodes above it on the stack.
			i := len(stack) - 1
			for stack[i] != v {
				i--
			}
			comp := stack[i:]
			if len(comp) > 1 {
				comps = append(comps, slices.Clone(comp))
			}
			for _, w := range comp {
				onStack[w] = false
			}
			stack = stack[:i]
		}
	}
	return comps
}

// step is how a breadth-first search reached a node.
type step struct {
	from int32
	kind DepKind
}

// cycleSearchBudget bounds the edges shortCycle's searches after the
// first visit, all together.
const cycleSearchBudget = 1 << 22

// shortCycle returns a short cycle of a strongly connected component:
// the shortest of the cycles through each of its nodes in turn (each by
// a breadth-first search inside comp, cut at the length of the best so
// far), until one of two transactions turns up or the searches after
// the first have visited cycleSearchBudget edges. A lost update or a
// write skew is then reported as its two transactions, not as a long
// path through the transactions that happened around it.
func (g *graph) shortCycle(comp []int32) []Dep {
	in := members(comp)
	budget := cycleSearchBudget
	unbounded := len(g.to) + 1 // the first search always finishes
	best := g.shortestCycle(comp[0], in, len(comp), &unbounded)
	for _, v := range comp[1:] {
		if len(best) == 2 || budget <= 0 {
			break
		}
		if c := g.shortestCycle(v, in, len(best)-1, &budget); c != nil {
			best = c
		}
	}
	return best
}

// twoCycle returns a cycle of two transactions of comp (a lost update,
// a write skew), or nil if it found none within the budget.
func (g *graph) twoCycle(comp []int32, in map[int32]bool, budget *int) []Dep {
	for _, u := range comp {
		for e := g.start[u]; e < g.start[u+1]; e++ {
			w := g.to[e]
			if !in[w] {
				continue
			}
			for b := g.start[w]; b < g.start[w+1]; b++ {
				if g.to[b] == u {
					return []Dep{{From: int(u), To: int(w), Kind: g.kind[e]}, {From: int(w), To: int(u), Kind: g.kind[b]}}
				}
			}
			if *budget -= int(g.start[w+1] - g.start[w]); *budget <= 0 {
				return nil
			}
		}
	}
	return nil
}

// shortestCycle returns the shortest cycle through v of at most limit
// edges using the nodes in in only, or nil if it has none or the budget
// of edges to visit ran out first.
func (g *graph) shortestCycle(v int32, in map[int32]bool, limit int, budget *int) []Dep {
	prev := make(map[int32]step)
	level := []int32{v}
	for depth := 1; depth <= limit && len(level) > 0; depth++ {
		var next []int32
		for _, u := range level {
			for e := g.start[u]; e < g.start[u+1]; e++ {
				*budget--
				w := g.to[e]
				if !in[w] {
					continue
				}
				if _, seen := prev[w]; seen {
					continue
				}
				prev[w] = step{u, g.kind[e]}
				if w == v {
					return g.unwind(v, prev)
				}
				next = append(next, w)
			}
			if *budget <= 0 {
				return nil
			}
		}
		level = next
	}
	return nil
}

// unwind follows the breadth-first search's steps back from v to v.
func (g *graph) unwind(v int32, prev map[int32]step) []Dep {
	var rev []Dep
	w := v
	for {
		s := prev[w]
		rev = append(rev, Dep{From: int(s.from), To: int(w), Kind: s.kind})
		w = s.from
		if w == v {
			break
		}
	}
	out := make([]Dep, len(rev))
	for i, d := range rev {
		out[len(rev)-1-i] = d
	}
	return out
}

package check

// findCycle returns a cycle of the graph, or nil: Tarjan's strongly
// connected components, run with an explicit stack, stopping at the
// first component of more than one transaction; then the shortest cycle
// through that component's root (breadth-first inside the component).
func (g *graph) findCycle() []Dep {
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
				return g.shortestCycle(v, comp)
			}
			for _, w := range comp {
				onStack[w] = false
			}
			stack = stack[:i]
		}
	}
	return nil
}

// step is how the breadth-first search reached a node.
type step struct {
	from int32
	kind DepKind
}

// shortestCycle returns the shortest cycle through v using the nodes of
// its component comp only.
func (g *graph) shortestCycle(v int32, comp []int32) []Dep {
	in := make(map[int32]bool, len(comp))
	for _, w := range comp {
		in[w] = true
	}
	prev := make(map[int32]step, len(comp))
	queue := []int32{v}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for e := g.start[u]; e < g.start[u+1]; e++ {
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
			queue = append(queue, w)
		}
	}
	return nil // not reached: a component's root lies on a cycle
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

package check

import "slices"

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

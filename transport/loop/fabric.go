// Package loop is the in-process fabric: many named nodes in one process,
// each a software NIC, reachable as loop://FABRIC/NODE. It is the default
// transport for the demo, the examples and most tests, and it injects
// faults — killed and paused nodes, partitions, added latency — so
// distributed protocols can be tested inside go test.
package loop

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// Scheme is the URI scheme of loop devices.
const Scheme = "loop"

func init() { verbs.Register(provider{}) }

type provider struct{}

func (provider) Scheme() string { return Scheme }

// Open opens loop://FABRIC/NODE, creating the fabric on first use.
func (provider) Open(u *url.URL) (verbs.Device, error) {
	fabric, node, err := parse(u)
	if err != nil {
		return nil, err
	}
	return Get(fabric).Open(node)
}

func parse(u *url.URL) (fabric, node string, err error) {
	node = strings.Trim(u.Path, "/")
	if u.Host == "" || node == "" || strings.Contains(node, "/") {
		return "", "", fmt.Errorf("%w: want loop://FABRIC/NODE, got %q", verbs.ErrBadURI, u.String())
	}
	return u.Host, node, nil
}

var (
	fabricsMu sync.Mutex
	fabrics   = map[string]*Fabric{}
)

// Get returns the fabric with the given name, creating it if needed.
func Get(name string) *Fabric {
	fabricsMu.Lock()
	defer fabricsMu.Unlock()
	f := fabrics[name]
	if f == nil {
		f = &Fabric{
			name:    name,
			nodes:   map[string]*nic.Node{},
			byID:    map[uint32]*nic.Node{},
			dead:    map[string]bool{},
			paused:  map[string]bool{},
			parts:   map[link]bool{},
			latency: map[link]time.Duration{},
		}
		fabrics[name] = f
	}
	return f
}

type link struct{ a, b string }

func mkLink(a, b string) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

// Fabric is a set of nodes in one process that can reach each other.
type Fabric struct {
	name string

	mu      sync.RWMutex
	nodes   map[string]*nic.Node
	byID    map[uint32]*nic.Node
	nextID  uint32
	faults  atomic.Int32 // number of active faults; zero keeps Route lock-free
	dead    map[string]bool
	paused  map[string]bool
	parts   map[link]bool
	latency map[link]time.Duration // "*" as one end means every link of the other
}

// Name returns the fabric's name.
func (f *Fabric) Name() string { return f.name }

// Address returns the URI of a node of this fabric.
func (f *Fabric) Address(node string) string { return Scheme + "://" + f.name + "/" + node }

// Open creates the node and returns it as a device. Opening a killed node
// restarts it empty; opening a node that is open fails.
func (f *Fabric) Open(node string) (verbs.Device, error) {
	if node == "" || strings.ContainsAny(node, "/*") {
		return nil, fmt.Errorf("%w: node name %q", verbs.ErrBadURI, node)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nodes[node]; ok && !f.dead[node] {
		return nil, fmt.Errorf("%w: node %q of fabric %q is already open", verbs.ErrInvalidArg, node, f.name)
	}
	if f.dead[node] {
		delete(f.dead, node)
		f.faults.Add(-1)
		if old := f.nodes[node]; old != nil {
			delete(f.byID, old.ID())
		}
	}
	f.nextID++
	var n *nic.Node
	n = nic.NewNode(nic.Config{
		Address:   f.Address(node),
		ID:        f.nextID,
		Transport: Scheme,
		Network:   f,
		OnClose:   func() { f.remove(node, n) },
	})
	f.nodes[node] = n
	f.byID[n.ID()] = n
	return n, nil
}

func (f *Fabric) remove(name string, n *nic.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodes[name] == n {
		delete(f.nodes, name)
		if f.dead[name] {
			delete(f.dead, name)
			f.faults.Add(-1)
		}
	}
	delete(f.byID, n.ID())
}

// Nodes returns the names of the fabric's nodes, sorted.
func (f *Fabric) Nodes() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := make([]string, 0, len(f.nodes))
	for k := range f.nodes {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Lookup returns the node with the given address, or nil.
func (f *Fabric) Lookup(address string) *nic.Node {
	u, err := url.Parse(address)
	if err != nil || u.Scheme != Scheme {
		return nil
	}
	fabric, node, err := parse(u)
	if err != nil || fabric != f.name {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.nodes[node]
}

// LookupID returns the node with the given ID, or nil.
func (f *Fabric) LookupID(id uint32) *nic.Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.byID[id]
}

// Resolve implements nic.Network.
func (f *Fabric) Resolve(address string) (nic.Target, error) {
	if n := f.Lookup(address); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("no device at %q in fabric %q", address, f.name)
}

// ResolveID implements nic.Network.
func (f *Fabric) ResolveID(id uint32) (nic.Target, error) {
	if n := f.LookupID(id); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("no device with id %d in fabric %q", id, f.name)
}

// Route implements nic.Network. With no fault injected it costs one atomic
// load.
func (f *Fabric) Route(from *nic.Node, to nic.Target) nic.Route {
	if f.faults.Load() == 0 {
		return nic.Route{}
	}
	a, b := nodeName(from.Address()), nodeName(to.Address())
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.dead[a] || f.dead[b] {
		return nic.Route{State: nic.PathDead}
	}
	if f.paused[a] || f.paused[b] || f.parts[mkLink(a, b)] {
		return nic.Route{State: nic.PathBlocked}
	}
	d := f.latency[mkLink(a, b)] + f.latency[mkLink("*", a)]
	if a != b {
		d += f.latency[mkLink("*", b)]
	}
	return nic.Route{State: nic.PathUp, Delay: d}
}

func nodeName(address string) string { return address[strings.LastIndexByte(address, '/')+1:] }

func (f *Fabric) node(name string) (*nic.Node, error) {
	n := f.nodes[name]
	if n == nil {
		return nil, fmt.Errorf("%w: no node %q in fabric %q", verbs.ErrInvalidArg, name, f.name)
	}
	return n, nil
}

// Kill crashes a node: its QPs move to ERROR and flush, and every request
// of its peers to it — queued or new — completes with RETRY_EXC_ERR,
// moving their QPs to ERROR. Opening the node again restarts it empty.
func (f *Fabric) Kill(name string) error {
	f.mu.Lock()
	n, err := f.node(name)
	if err == nil && !f.dead[name] {
		f.dead[name] = true
		f.faults.Add(1)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	n.Crash()
	return nil
}

// Pause freezes a node's network: requests to and from it wait until
// Resume, and fail with RETRY_EXC_ERR if the pause outlasts their QP's
// retry budget (Timeout × (RetryCount+1)).
func (f *Fabric) Pause(name string) error { return f.toggle(f.paused, name, true) }

// Resume ends a Pause.
func (f *Fabric) Resume(name string) error { return f.toggle(f.paused, name, false) }

// Partition cuts the link between two nodes: requests between them wait
// and fail like requests to a paused node.
func (f *Fabric) Partition(a, b string) error { return f.toggleLink(a, b, true) }

// Heal restores the link between two nodes.
func (f *Fabric) Heal(a, b string) error { return f.toggleLink(a, b, false) }

func (f *Fabric) toggleLink(a, b string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.node(a); err != nil {
		return err
	}
	if _, err := f.node(b); err != nil {
		return err
	}
	l := mkLink(a, b)
	if f.parts[l] != on {
		if on {
			f.parts[l] = true
			f.faults.Add(1)
		} else {
			delete(f.parts, l)
			f.faults.Add(-1)
		}
	}
	return nil
}

func (f *Fabric) toggle(m map[string]bool, name string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.node(name); err != nil {
		return err
	}
	if m[name] != on {
		if on {
			m[name] = true
			f.faults.Add(1)
		} else {
			delete(m, name)
			f.faults.Add(-1)
		}
	}
	return nil
}

// SetCost turns on the software cost model of node name (nic.CostModel:
// per-request service time on one pipeline, slower past a WQE-cache
// bound); a zero model turns it off.
func (f *Fabric) SetCost(name string, c nic.CostModel) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.node(name)
	if err != nil {
		return err
	}
	n.SetCost(c)
	return nil
}

// SetLatency adds a one-way delay d to the link between nodes a and b; b
// may be "*" for every link of a. Requests take effect and complete after
// the round trip (2×d), pipelined. Zero removes the delay.
func (f *Fabric) SetLatency(a, b string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: negative latency", verbs.ErrInvalidArg)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.node(a); err != nil {
		return err
	}
	if b != "*" {
		if _, err := f.node(b); err != nil {
			return err
		}
	}
	l := mkLink(a, b)
	old := f.latency[l]
	switch {
	case old == 0 && d > 0:
		f.faults.Add(1)
	case old > 0 && d == 0:
		f.faults.Add(-1)
	}
	if d == 0 {
		delete(f.latency, l)
	} else {
		f.latency[l] = d
	}
	return nil
}

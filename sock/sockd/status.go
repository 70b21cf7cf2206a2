package sockd

// Status is a snapshot of the daemon: what `rdmakit sockd status` prints.
type Status struct {
	Listeners []ListenerStatus `json:"listeners"`
	Apps      []AppStatus      `json:"apps"`
}

// ListenerStatus is one registered listener.
type ListenerStatus struct {
	URI        string         `json:"uri"`
	App        string         `json:"app"`
	PID        int            `json:"pid"`
	Partitions int            `json:"partitions"`
	RingSize   int            `json:"ring_size"`
	MTU        int            `json:"mtu"`
	Conns      []int          `json:"conns"`  // admitted connections per partition
	ByApp      map[string]int `json:"by_app"` // admitted connections per dialing application
	Admitted   uint64         `json:"admitted"`
	Refused    uint64         `json:"refused"`
}

// AppStatus is what one application holds.
type AppStatus struct {
	App         string `json:"app"`
	Conns       int    `json:"conns"`     // as the dialer, admitted and not released
	Listeners   int    `json:"listeners"` // registered
	WindowBytes int64  `json:"window_bytes"`
	Refused     uint64 `json:"refused"` // connections refused by its max_conns
}

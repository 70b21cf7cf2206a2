package memnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/rdmakit/rdmakit/cm"
)

// Info is what a client needs to reach a server and what the server
// offers: the `node` command prints it as one JSON line (ReadInfo parses
// it back), and Server.Info returns it in process.
type Info struct {
	// Device is the address of the server's verbs device.
	Device string `json:"device"`
	// CM is the connection manager's address, host:port: what clients
	// cm.Dial.
	CM string `json:"cm"`
	// Metrics is the URL of the Prometheus endpoint; empty when none.
	Metrics string `json:"metrics,omitempty"`
	// Service is the Service's Name: what clients put in Hello.Service
	// (empty for the memory node).
	Service string `json:"service,omitempty"`
	// Token reports whether clients need a token (never the token).
	Token bool `json:"token,omitempty"`
	// Access is what clients may do to the regions, e.g.
	// "read,write,atomic" (AccessString).
	Access string `json:"access,omitempty"`
	// Memory is the bytes registered for clients.
	Memory int64 `json:"memory,omitempty"`
	// Recv and RecvSize are the receives kept posted per client and the
	// bytes of each; Echo says whether messages are sent back.
	Recv     int  `json:"recv,omitempty"`
	RecvSize int  `json:"recv_size,omitempty"`
	Echo     bool `json:"echo"`
	// Regions are the regions every client receives the descriptors of.
	Regions []Region `json:"regions"`
}

// Region is a memory region's descriptor in an Info.
type Region struct {
	Addr uint64 `json:"addr"` // the address clients use (verbs.MR.Addr)
	Len  uint64 `json:"len"`  // its length in bytes
	RKey uint32 `json:"rkey"` // its remote key
}

// Desc returns r as a cm.MRDesc.
func (r Region) Desc() cm.MRDesc { return cm.MRDesc{Addr: r.Addr, Len: r.Len, RKey: r.RKey} }

// RegionOf returns d as a Region.
func RegionOf(d cm.MRDesc) Region { return Region{Addr: d.Addr, Len: d.Len, RKey: d.RKey} }

// ErrNoInfo is returned by ReadInfo when the input ends without an Info
// line.
var ErrNoInfo = errors.New("memnode: no announcement (a JSON line) in the output")

// ReadInfo reads lines from r until the first one that is a JSON object
// and returns it as an Info: what the `node` command prints. Every line
// read, the JSON one included, is copied to echo when it is not nil.
// ReadInfo reads r one byte at a time and never past that line, so the
// caller can go on reading r.
func ReadInfo(r io.Reader, echo io.Writer) (Info, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 && b[0] != '\n' {
			if len(line) >= maxInfoLine {
				return Info{}, fmt.Errorf("memnode: an output line longer than %d bytes", maxInfoLine)
			}
			line = append(line, b[0])
			continue
		}
		if n == 1 || (err != nil && len(line) > 0) {
			if echo != nil {
				fmt.Fprintf(echo, "%s\n", line)
			}
			if bytes.HasPrefix(line, []byte("{")) {
				var info Info
				if err := json.Unmarshal(line, &info); err != nil {
					return Info{}, fmt.Errorf("memnode: announcement %q: %w", line, err)
				}
				return info, nil
			}
			line = line[:0]
		}
		if errors.Is(err, io.EOF) {
			return Info{}, ErrNoInfo
		} else if err != nil {
			return Info{}, fmt.Errorf("memnode: reading the announcement: %w", err)
		}
	}
}

// maxInfoLine bounds a line ReadInfo takes (204 regions fit easily).
const maxInfoLine = 1 << 20

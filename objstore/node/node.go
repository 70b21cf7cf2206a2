package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/objstore"
)

// Config configures a node.
type Config struct {
	// Mem is the store's memory in bytes.
	Mem int64
	// Socket is where local clients connect: a path or "@name"; empty
	// picks a fresh abstract name.
	Socket string
	// MaxObjectSize bounds one object; 0 means Mem.
	MaxObjectSize int64
	// Transfer configures serving objects to peers and fetching from
	// them.
	Transfer Transfer
	// Stats is the HTTP address serving /stats; empty serves none.
	Stats string
	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Announcement is what a node's first line of output says.
type Announcement struct {
	// Socket is where local clients connect.
	Socket string
	// Verbs and TCP are where peers fetch from (empty when not served).
	Verbs, TCP string
	// Stats is the address of the /stats endpoint (empty when none).
	Stats string
}

// String is the line Serve writes, without its newline.
func (a Announcement) String() string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	return fmt.Sprintf("objstore: serving socket=%s verbs=%s tcp=%s stats=%s", dash(a.Socket), dash(a.Verbs), dash(a.TCP), dash(a.Stats))
}

var announceLine = regexp.MustCompile(`objstore: serving socket=(\S+) verbs=(\S+) tcp=(\S+) stats=(\S+)`)

// ErrAnnouncement is returned by ParseAnnouncement for a line that is
// not a node's announcement.
var ErrAnnouncement = errors.New("node: not an objstore announcement")

// ParseAnnouncement reads the line Serve writes.
func ParseAnnouncement(line string) (Announcement, error) {
	m := announceLine.FindStringSubmatch(line)
	if m == nil {
		return Announcement{}, fmt.Errorf("%w: %q", ErrAnnouncement, strings.TrimSpace(line))
	}
	undash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	return Announcement{Socket: m[1], Verbs: undash(m[2]), TCP: undash(m[3]), Stats: undash(m[4])}, nil
}

// StatsReport is the JSON document /stats serves.
type StatsReport struct {
	// Store is the store's counters.
	Store objstore.Stats `json:"store"`
	// Transfer is the transfer layer's counters, both sides.
	Transfer TransferStats `json:"transfer"`
}

// Serve runs a node until ctx ends: it starts the store, the transfer
// server and fetcher and the stats endpoint, writes its announcement
// line to out, and serves. It returns nil after ctx ends and the node has
// shut down.
func Serve(ctx context.Context, out io.Writer, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr, err := newTransfer(cfg.Transfer, log)
	if err != nil {
		return err
	}
	st, err := objstore.NewStore(objstore.Config{
		Mem: cfg.Mem, Socket: cfg.Socket, MaxObjectSize: cfg.MaxObjectSize,
		Fetcher: tr.objectFetcher(), Logger: log,
	})
	if err != nil {
		tr.close()
		return fmt.Errorf("node: %w", err)
	}
	defer st.Close()
	defer tr.close() // before the store closes: the server holds pins
	if err := tr.serve(ctx, st); err != nil {
		return err
	}
	ann := Announcement{Socket: st.Addr(), Verbs: tr.verbsAddr(), TCP: tr.tcpAddr()}
	if cfg.Stats != "" {
		addr, stop, err := serveStats(cfg.Stats, func() StatsReport {
			return StatsReport{Store: st.Stats(), Transfer: tr.stats()}
		}, log)
		if err != nil {
			return err
		}
		defer stop()
		ann.Stats = addr
	}
	if _, err := fmt.Fprintln(out, ann.String()); err != nil {
		return fmt.Errorf("node: announce: %w", err)
	}
	return st.Serve(ctx)
}

// serveStats serves report as JSON at http://addr/stats and returns the
// address it got and a function that stops it.
func serveStats(addr string, report func() StatsReport, log *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("node: stats: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(report()); err != nil {
			log.Debug("node: stats: write", "err", err)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("node: stats server stopped", "err", err)
		}
	}()
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// ReadStats gets a node's /stats report from addr (an Announcement's
// Stats).
func ReadStats(ctx context.Context, addr string) (StatsReport, error) {
	var r StatsReport
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/stats", nil)
	if err != nil {
		return r, fmt.Errorf("node: stats: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, fmt.Errorf("node: stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("node: stats: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("node: stats: %w", err)
	}
	return r, nil
}

package bench

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// ModulePath is rdmakit's module path.
const ModulePath = "github.com/rdmakit/rdmakit"

// Meta says what produced a Result.
type Meta struct {
	CPU        string    `json:"cpu"`                  // /proc/cpuinfo "model name"
	Cores      int       `json:"cores"`                // logical CPUs
	GoVersion  string    `json:"go_version"`           // runtime.Version()
	GOMAXPROCS int       `json:"gomaxprocs"`           // at the time of the run
	OS         string    `json:"os"`                   // runtime.GOOS
	Arch       string    `json:"arch"`                 // runtime.GOARCH
	Transport  string    `json:"transport"`            // transport name, e.g. "loop"
	Device     string    `json:"device"`               // device URIs measured
	Poll       string    `json:"poll"`                 // polling policy
	Timestamp  time.Time `json:"timestamp"`            // start of the run
	Elapsed    string    `json:"elapsed"`              // wall time of the run
	Quick      bool      `json:"quick"`                // run with Options.Quick
	Version    string    `json:"rdmakit"`              // rdmakit module version
	Duration   string    `json:"point_time,omitempty"` // Options.Duration, if set
	Hostname   string    `json:"hostname"`             // os.Hostname
	Extra      []string  `json:"extra,omitempty"`      // experiment-specific facts, "key: value"
}

// collectMeta describes this machine and the options of a run.
func collectMeta(o *Options) Meta {
	host, _ := os.Hostname()
	m := Meta{
		CPU:        CPUModel(),
		Cores:      runtime.NumCPU(),
		GoVersion:  runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Poll:       o.Poll.String(),
		Timestamp:  time.Now().UTC().Truncate(time.Second),
		Quick:      o.Quick,
		Version:    Version(),
		Hostname:   host,
	}
	if o.Duration > 0 {
		m.Duration = o.Duration.String()
	}
	if t := o.Transport; t != "" {
		m.Transport, _, _ = strings.Cut(t, ":")
	}
	return m
}

// CPUModel returns the "model name" of the first CPU in /proc/cpuinfo, or
// runtime.GOARCH where there is none.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// Version returns the version of the rdmakit module in this binary: the
// main module's version (with the VCS revision when it is "(devel)"), or
// the version of the dependency.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == ModulePath {
		v := bi.Main.Version
		if v == "" || v == "(devel)" {
			v = "(devel)"
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " " + s.Value[:12]
				}
				if s.Key == "vcs.modified" && s.Value == "true" {
					v += "+dirty"
				}
			}
		}
		return v
	}
	for _, d := range bi.Deps {
		if d.Path == ModulePath {
			return d.Version
		}
	}
	return "(devel)"
}

package objexp

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/rdmakit/rdmakit/bench"
)

// tuneThreshold is the hybrid's threshold over one transport, measured
// in this run as the issue asks ("the switch at a size threshold that
// `rdmakit objstore tune` measures on this machine"): it runs `rdmakit
// objstore tune` against the transport's holder (its --listen address
// and --socket, where tune creates its objects and deletes them after)
// from a fetching device of that transport, and reads the threshold it
// prints. It returns the threshold and tune's table for the notes.
func tuneThreshold(ctx context.Context, env *bench.Env, h *holderStore, device string) (int, string, error) {
	args := []string{"objstore", "tune", "--peer", h.Verbs, "--peer-socket", h.Socket, "--device", device}
	if env.Quick {
		args = append(args, "--sizes", "1KiB,32KiB,1MiB", "--runs", "3")
	} else {
		args = append(args, "--sizes", "1KiB,4KiB,16KiB,32KiB,64KiB,128KiB,256KiB,512KiB,1MiB,2MiB,4MiB", "--runs", "30")
	}
	cmd := env.Command(ctx, args...)
	out, err := cmd.Output()
	if err != nil {
		return 0, "", fmt.Errorf("objexp: %s: %w (%s)", strings.Join(args, " "), err, out)
	}
	th, err := parseTuneThreshold(string(out))
	return th, string(out), err
}

var tunePass = regexp.MustCompile(`pass --threshold (\d+)`)

// parseTuneThreshold reads the threshold from tune's last line, e.g.
// "threshold: 256 KiB (…; pass --threshold 262144 to objstore serve)".
func parseTuneThreshold(out string) (int, error) {
	m := tunePass.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("objexp: no threshold in objstore tune's output %q", out)
	}
	return strconv.Atoi(m[1])
}

// tuneSummary is tune's table on one line per size, for a note.
func tuneSummary(out string) string {
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] != "size" { // "1 KiB 127.6µs 210.6µs sendrecv"
			rows = append(rows, fmt.Sprintf("%s %s: %s/%s", f[0], f[1], f[2], f[3]))
		}
	}
	return strings.Join(rows, ", ")
}

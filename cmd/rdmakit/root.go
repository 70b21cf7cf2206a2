package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	_ "github.com/rdmakit/rdmakit/transport/loop" // the default transport
	_ "github.com/rdmakit/rdmakit/transport/shm"  // cross-process shared memory
	_ "github.com/rdmakit/rdmakit/transport/tcp"  // cross-host soft NIC
	"github.com/rdmakit/rdmakit/verbs"
)

// newRootCmd builds the command tree writing to stdout and stderr; prof
// receives its --cpuprofile (run stops it when the command returns).
func newRootCmd(stdout, stderr io.Writer, prof *profiling) *cobra.Command {
	var level string
	root := &cobra.Command{
		Use:           "rdmakit",
		Short:         "Remote direct memory access for Go, with or without RDMA hardware",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var l slog.Level
			if err := l.UnmarshalText([]byte(level)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: l})))
			return prof.start()
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&level, "log-level", "warn", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&prof.path, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof reads it)")
	root.AddCommand(newDemoCmd(), newNodeCmd(), newKVCmd(), newBTreeCmd(), newRSCmd(), newTxnCmd(), newSockCmd(), newPerfCmd(), newBenchCmd(), newVersionCmd())
	root.AddCommand(newSockdCmd(), newObjstoreCmd())
	return root
}

// pollFlag parses a --poll value.
func pollFlag(s string) (verbs.PollPolicy, error) {
	return verbs.ParsePollPolicy(strings.ToLower(s))
}

// progressWriter is where progress bars go: stderr when it is the
// process's stderr, nothing otherwise (bench decides whether it is a
// terminal).
func progressWriter(cmd *cobra.Command) io.Writer {
	if w := cmd.ErrOrStderr(); w == os.Stderr {
		return w
	}
	return nil
}

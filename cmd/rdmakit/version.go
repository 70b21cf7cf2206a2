package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/verbs"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the rdmakit version, the Go version and the registered transports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "rdmakit     %s\n", bench.Version())
			fmt.Fprintf(w, "go          %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			fmt.Fprintf(w, "transports  %s\n", strings.Join(verbs.Providers(), ", "))
			return nil
		},
	}
}

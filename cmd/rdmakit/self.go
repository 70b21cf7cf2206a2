package main

import (
	"context"
	"os"
	"os/exec"
)

// selfNode is bench.Options.Node: it runs `rdmakit node ARGS…` from this
// very binary in a new process. RDMAKIT_TEST_MAIN makes a test binary of
// this package act as the command too (see TestMain), so experiments can
// run from tests.
func selfNode(ctx context.Context, args ...string) *exec.Cmd {
	return selfCommand(ctx, append([]string{"node"}, args...)...)
}

// selfCommand is bench.Options.Command: `rdmakit ARGS…` from this very
// binary in a new process (a test binary too, as selfNode says).
func selfCommand(ctx context.Context, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "RDMAKIT_TEST_MAIN=1")
	return cmd
}

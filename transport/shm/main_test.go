package shm_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var pid = os.Getpid()

// childEnv, when set to MODE or MODE:ARG, makes the test binary a child
// process running childModes[MODE](ARG) instead of the tests.
const childEnv = "RDMAKIT_SHM_TEST_CHILD"

// childModes are the roles a re-executed test binary can play; files
// register theirs in init.
var childModes = map[string]func(arg string) int{}

// afterTests run once m.Run returns (stopping shared children).
var afterTests []func()

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		mode, arg, _ := strings.Cut(v, ":")
		f := childModes[mode]
		if f == nil {
			fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
			os.Exit(2)
		}
		os.Exit(f(arg))
	}
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// childCommand is the command that runs this test binary as a child in
// mode with arg.
func childCommand(t testing.TB, mode, arg string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode+":"+arg)
	cmd.Stderr = os.Stderr
	return cmd
}

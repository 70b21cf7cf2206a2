package remotedev

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// The child-process harness: a test binary re-executes itself as a child
// that plays a role (a node serving devices, or a role of the test's own)
// instead of running the tests. The transports' tests share it so that
// starting, talking to and stopping a child is written once.

// childEnv, set to ROLE or ROLE:ARG, makes a test binary run roles[ROLE](ARG)
// instead of its tests.
const childEnv = "RDMAKIT_TEST_CHILD"

var (
	rolesMu sync.Mutex
	roles   = map[string]func(arg string) int{}
	atExit  []func()
)

// Role registers main as the role name a re-executed test binary can play
// (call it from an init function of a test file). main receives the
// argument given to Command and returns the child's exit code.
func Role(name string, main func(arg string) int) {
	rolesMu.Lock()
	defer rolesMu.Unlock()
	if _, dup := roles[name]; dup {
		panic("remotedev: role " + name + " registered twice")
	}
	roles[name] = main
}

// runner is what TestMain runs: a *testing.M.
type runner interface{ Run() int }

// TestMain is the TestMain of a package whose tests start children: in a
// child it runs the child's role and exits with its code; otherwise it
// runs the tests, stops the shared nodes they started, and exits. opts are
// the options node children serve with (WithCrash, typically).
func TestMain(m runner, opts ...Option) {
	nodeOptions = opts
	if v := os.Getenv(childEnv); v != "" {
		name, arg, _ := strings.Cut(v, ":")
		rolesMu.Lock()
		main := roles[name]
		rolesMu.Unlock()
		if main == nil {
			fmt.Fprintf(os.Stderr, "unknown child role %q\n", name)
			os.Exit(2)
		}
		os.Exit(main(arg))
	}
	code := m.Run()
	rolesMu.Lock()
	fs := atExit
	rolesMu.Unlock()
	for _, f := range fs {
		f()
	}
	os.Exit(code)
}

// onExit has f run by TestMain once the tests have run.
func onExit(f func()) {
	rolesMu.Lock()
	defer rolesMu.Unlock()
	atExit = append(atExit, f)
}

// Command is the command that runs this test binary as a child playing
// role with arg (its environment ends with the variable that says so).
// Its stderr is this process's; the caller sets up stdin
// and stdout and starts it.
func Command(role, arg string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("remotedev: the test binary: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	// The race runtime sleeps a second at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), "GORACE="+gorace, childEnv+"="+role+":"+arg)
	cmd.Stderr = os.Stderr
	return cmd, nil
}

package shmem

import (
	"os/exec"
	"testing"
)

func TestSelf(t *testing.T) {
	me := Self()
	if me.Pid() <= 0 || me != Self() || !me.Alive() {
		t.Fatalf("Self() = %v, alive %v", me, me.Alive())
	}
	if ProcessID(0).Alive() {
		t.Fatal("the zero ProcessID is alive")
	}
}

func TestAliveExitedProcess(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot run /bin/true:", err)
	}
	_, start, err := procStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	id := makeID(cmd.Process.Pid, uint32(start))
	_ = cmd.Wait()
	if id.Alive() {
		t.Fatalf("%v alive after exit", id)
	}
}

func TestParseStat(t *testing.T) {
	fields := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12345 19 20\n"
	for _, tc := range []struct {
		line  string
		state byte
		start uint64
		ok    bool
	}{
		{"42 (go) " + fields, 'S', 12345, true},
		{"42 (a) b) (c) " + fields, 'S', 12345, true},
		{"42 (x y)" + fields, 'S', 12345, true},
		{"42 (go) Z 1 2", 0, 0, false},
		{"42 go S", 0, 0, false},
		{"42 (go) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12345", 0, 0, false},
		{"42 (go) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12x45", 0, 0, false},
	} {
		state, start, err := parseStat([]byte(tc.line))
		if (err == nil) != tc.ok || state != tc.state || start != tc.start {
			t.Errorf("parseStat(%q) = %c, %d, %v", tc.line, state, start, err)
		}
	}
}

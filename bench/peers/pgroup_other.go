//go:build !linux

package peers

import (
	"os/exec"
	"time"
)

// ownGroup leaves the command as it is: process groups are handled on
// Linux only.
func ownGroup(*exec.Cmd) {}

// killGroup reports true: without Linux's /proc the group is not swept.
func killGroup(int, time.Duration) bool { return true }

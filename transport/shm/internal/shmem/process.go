package shmem

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// ProcessID names a process for as long as it lives and never afterwards:
// the pid in the high 32 bits and, in the low 32 bits, a token derived
// from the process's start time (field 22 of /proc/PID/stat, clock ticks
// since boot, truncated to 32 bits). A later process that reuses the pid
// has a different start time, so it does not match the ProcessID of the
// process that died. It fits one 64-bit word, so it can be stored and
// compared atomically in shared memory. The zero ProcessID names nobody.
type ProcessID uint64

// Pid returns the process id part.
func (p ProcessID) Pid() int { return int(p >> 32) }

// Token returns the start-time token part.
func (p ProcessID) Token() uint32 { return uint32(p) }

// String formats p as "pid/token".
func (p ProcessID) String() string { return fmt.Sprintf("%d/%#x", p.Pid(), p.Token()) }

// Self returns the ProcessID of the calling process.
func Self() ProcessID { return self().id }

type selfInfo struct {
	id ProcessID
	// proc reports whether /proc is usable: then a missing /proc/PID
	// means a dead process. Without it the token is random and Alive
	// falls back to kill(pid, 0), which cannot see pid reuse.
	proc bool
}

var self = sync.OnceValue(func() selfInfo {
	pid := unix.Getpid()
	if _, start, err := procStat(pid); err == nil {
		return selfInfo{id: makeID(pid, uint32(start)), proc: true}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return selfInfo{id: makeID(pid, binary.LittleEndian.Uint32(b[:])), proc: false}
})

func makeID(pid int, token uint32) ProcessID {
	return ProcessID(uint64(uint32(pid))<<32 | uint64(token))
}

// ProcessOf returns the ProcessID of the running process pid (for
// instance a peer's pid from SO_PEERCRED).
func ProcessOf(pid int) (ProcessID, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("shmem: pid %d", pid)
	}
	if pid == self().id.Pid() {
		return self().id, nil
	}
	if !self().proc {
		return 0, fmt.Errorf("shmem: /proc is not readable: cannot name process %d", pid)
	}
	state, start, err := procStat(pid)
	if err != nil {
		return 0, fmt.Errorf("shmem: process %d: %w", pid, err)
	}
	if state == 'Z' || state == 'X' {
		return 0, fmt.Errorf("shmem: process %d has exited", pid)
	}
	return makeID(pid, uint32(start)), nil
}

// Alive reports whether the process p names still exists and can still
// act: false once it has exited, been killed (also while it is an
// unreaped zombie) or its pid has been taken by a different process.
// Alive of the zero ProcessID is false. It costs a read of /proc/PID/stat
// (a few microseconds); it is meant for slow paths.
func (p ProcessID) Alive() bool {
	pid := p.Pid()
	if pid <= 0 {
		return false
	}
	me := self()
	if pid == me.id.Pid() {
		// Our pid: either us, or an earlier holder of our pid, which
		// is therefore dead.
		return p == me.id
	}
	if me.proc {
		state, start, err := procStat(pid)
		// A zombie has exited; 'X' is the instant of its reaping.
		switch {
		case err == nil:
			return state != 'Z' && state != 'X' && uint32(start) == p.Token()
		case err == unix.ENOENT || err == unix.ESRCH:
			return false
		}
		// Unreadable for another reason: fall back to the signal probe.
	}
	err := unix.Kill(pid, 0)
	return err != unix.ESRCH
}

// procStat returns the state letter and the start time (clock ticks since
// boot) of process pid from /proc/PID/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil {
		return 0, 0, err
	}
	return parseStat(buf[:n])
}

// parseStat parses the state (field 3) and starttime (field 22) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may itself contain spaces and parentheses, so fields are counted from
// the last ')'.
func parseStat(line []byte) (state byte, start uint64, err error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, errBadStat
	}
	rest := line[i+1:]
	for field := 3; field <= 22; field++ {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			return 0, 0, errBadStat
		}
		tok := rest[:end]
		rest = rest[end:]
		switch field {
		case 3:
			if len(tok) != 1 {
				return 0, 0, errBadStat
			}
			state = tok[0]
		case 22:
			for _, c := range tok {
				if c < '0' || c > '9' {
					return 0, 0, errBadStat
				}
				start = start*10 + uint64(c-'0')
			}
		}
	}
	return state, start, nil
}

var errBadStat = errors.New("shmem: malformed /proc/PID/stat")

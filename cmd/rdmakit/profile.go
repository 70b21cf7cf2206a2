package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// profiling is the --cpuprofile of one command line: the file the CPU
// profile goes to while the command runs (go tool pprof reads it).
type profiling struct {
	path string
	once sync.Once
	f    *os.File
}

// start begins the CPU profile when --cpuprofile was given.
func (p *profiling) start() error {
	if p.path == "" {
		return nil
	}
	f, err := os.Create(p.path)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	p.f = f
	return nil
}

// stop ends the profile and closes its file; it runs once, whether the
// command succeeded or not.
func (p *profiling) stop() {
	p.once.Do(func() {
		if p.f == nil {
			return
		}
		pprof.StopCPUProfile()
		p.f.Close()
	})
}

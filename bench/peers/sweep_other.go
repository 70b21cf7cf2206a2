//go:build !linux

package peers

import "time"

// processesIn returns nothing: only Linux's /proc tells where processes
// work.
func processesIn(string) []int { return nil }

// killProcessesIn reports true: without /proc nothing is swept.
func killProcessesIn(string, time.Duration) bool { return true }

// removeOrphanSegments does nothing without /proc.
func removeOrphanSegments(...int) {}

//go:build !race

package sock

func raceRelease() {}
func raceAcquire() {}

//go:build race

package locate_test

// raceEnabled: the race detector slows the matcher several times over,
// and the heaviest tests cover less under it.
const raceEnabled = true

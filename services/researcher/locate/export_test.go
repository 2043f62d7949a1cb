package locate

// SetDebugScores lets tests see every candidate's evidence.
func SetDebugScores(f func(clip string, o int32, votes int, mu float64, hashes int, sig float64)) {
	debugScores = f
}

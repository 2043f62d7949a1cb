package warc

// Streamed is o with every member read by the streaming inflate.
func Streamed(o Options) Options {
	o.stream = true
	return o
}

//go:build !(cgo && libdeflate)

package warc

// Inflate names the inflate this build reads gzip members with:
// klauspost/compress's, streamed (build with -tags libdeflate and
// CGO_ENABLED=1 for libdeflate's: scripts/build-service).
const Inflate = "klauspost/compress"

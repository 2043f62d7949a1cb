//go:build cgo && libdeflate

package warc

/*
#cgo LDFLAGS: -ldeflate
#include <stdlib.h>
#include <libdeflate.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// This build inflates members with libdeflate (built with -tags libdeflate
// and CGO_ENABLED=1, against Debian's libdeflate-dev; scripts/images links
// it statically): about three times the speed of the streaming inflate on
// web pages, a whole member in one call, its CRC-32 and length checked.

func init() { newWholeInflater = newLibdeflate }

// Inflate names the inflate this build reads gzip members with:
// libdeflate's, whole, a large member streamed by klauspost/compress's.
const Inflate = "libdeflate"

// maxWholeContent is the largest member content inflated whole: a larger
// one is streamed.
const maxWholeContent = 4 << 20

// libdeflate is a libdeflate decompressor and the buffer it inflates into.
type libdeflate struct {
	d   *C.struct_libdeflate_decompressor
	out []byte
}

func newLibdeflate() wholeInflater {
	d := C.libdeflate_alloc_decompressor()
	if d == nil {
		return nil
	}
	l := &libdeflate{d: d, out: make([]byte, 128<<10)}
	runtime.AddCleanup(l, func(d *C.struct_libdeflate_decompressor) { C.libdeflate_free_decompressor(d) }, d)
	return l
}

func (l *libdeflate) member(in []byte) ([]byte, int, bool) {
	if len(in) == 0 {
		return nil, 0, false
	}
	for {
		var used, n C.size_t
		res := C.libdeflate_gzip_decompress_ex(l.d,
			unsafe.Pointer(unsafe.SliceData(in)), C.size_t(len(in)),
			unsafe.Pointer(unsafe.SliceData(l.out)), C.size_t(len(l.out)),
			&used, &n)
		switch res {
		case C.LIBDEFLATE_SUCCESS:
			return l.out[:n], int(used), true
		case C.LIBDEFLATE_INSUFFICIENT_SPACE:
			if len(l.out) >= maxWholeContent {
				return nil, 0, false
			}
			l.out = make([]byte, maxWholeContent) // at once: no trail of smaller ones
		default:
			// Bad data, or a member longer than in: streamed, which
			// tells the two apart and says where.
			return nil, 0, false
		}
	}
}

// Package artifact keeps what the researcher derives from audio (an
// episode's print, a clip's print: services/researcher/locate), so that
// each piece of audio is analysed once, not once per work item: in the
// blob store under a derived prefix, where every researcher finds them,
// with a bounded local cache in front. Every artifact is a checked file:
// its data in chunks, each with its CRC-32C, verified whenever it is
// read; a chunk that fails is an error (ErrCorrupt), and the artifact is
// discarded and computed again, never trusted.
package artifact

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// ChunkSize is how much data one CRC covers.
const ChunkSize = 1 << 20

// magic ends every artifact file.
const magic = "ARCVART1"

// footerTail is the fixed end of a file: data length (uint64), metadata
// length (uint32), the footer's own CRC (uint32), magic.
const footerTail = 8 + 4 + 4 + len(magic)

// maxMeta bounds an artifact's metadata.
const maxMeta = 1 << 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned (wrapped) for an artifact whose bytes are not the
// ones written: a chunk or the footer fails its CRC, or the file is cut.
var ErrCorrupt = errors.New("artifact is corrupt")

// writeFile is the writing half of a checked file: data, then the footer
// (metadata, the chunks' CRCs, footerTail).
type writeFile struct {
	w     io.Writer
	chunk []byte
	crcs  []uint32
	n     int64
	err   error
}

func (f *writeFile) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), ChunkSize-len(f.chunk))
		f.chunk = append(f.chunk, p[:k]...)
		p = p[k:]
		if len(f.chunk) == ChunkSize {
			f.flushChunk()
		}
	}
	return n, f.err
}

func (f *writeFile) flushChunk() {
	if len(f.chunk) == 0 || f.err != nil {
		return
	}
	f.crcs = append(f.crcs, crc32.Checksum(f.chunk, castagnoli))
	_, f.err = f.w.Write(f.chunk)
	f.n += int64(len(f.chunk))
	f.chunk = f.chunk[:0]
}

// finish writes the last chunk and the footer.
func (f *writeFile) finish(meta []byte) error {
	if len(meta) > maxMeta {
		return fmt.Errorf("artifact metadata of %d bytes, at most %d", len(meta), maxMeta)
	}
	f.flushChunk()
	if f.err != nil {
		return f.err
	}
	foot := append([]byte(nil), meta...)
	for _, c := range f.crcs {
		foot = binary.LittleEndian.AppendUint32(foot, c)
	}
	foot = binary.LittleEndian.AppendUint64(foot, uint64(f.n))
	foot = binary.LittleEndian.AppendUint32(foot, uint32(len(meta)))
	foot = binary.LittleEndian.AppendUint32(foot, crc32.Checksum(foot, castagnoli))
	foot = append(foot, magic...)
	_, err := f.w.Write(foot)
	return err
}

// File is an artifact open for reading: every read verifies the chunks it
// reads.
type File struct {
	f    *os.File
	size int64 // of the data
	crcs []uint32
	meta []byte

	mu  sync.Mutex
	at  int64 // the chunk held in buf (−1: none)
	buf []byte
}

// openFile opens and checks the footer of a checked file.
func openFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	a, err := readFooter(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

func readFooter(f *os.File) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	total := st.Size()
	if total < int64(footerTail) {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a footer", ErrCorrupt, total)
	}
	var tail [footerTail]byte
	if _, err := f.ReadAt(tail[:], total-int64(footerTail)); err != nil {
		return nil, err
	}
	if string(tail[16:]) != magic {
		return nil, fmt.Errorf("%w: no artifact footer", ErrCorrupt)
	}
	size := int64(binary.LittleEndian.Uint64(tail[0:]))
	metaLen := int64(binary.LittleEndian.Uint32(tail[8:]))
	chunks := (size + ChunkSize - 1) / ChunkSize
	footLen := metaLen + 4*chunks
	if size < 0 || metaLen > maxMeta || size+footLen+int64(footerTail) != total {
		return nil, fmt.Errorf("%w: footer says %d bytes of data and %d of metadata, the file has %d", ErrCorrupt, size, metaLen, total)
	}
	foot := make([]byte, footLen+12)
	if _, err := f.ReadAt(foot, size); err != nil {
		return nil, err
	}
	if crc32.Checksum(foot, castagnoli) != binary.LittleEndian.Uint32(tail[12:]) {
		return nil, fmt.Errorf("%w: the footer fails its CRC", ErrCorrupt)
	}
	a := &File{f: f, size: size, meta: foot[:metaLen], at: -1}
	for i := range chunks {
		a.crcs = append(a.crcs, binary.LittleEndian.Uint32(foot[metaLen+4*i:]))
	}
	return a, nil
}

// Meta is the metadata the artifact was committed with.
func (a *File) Meta() []byte { return a.meta }

// Size is the length of its data.
func (a *File) Size() int64 { return a.size }

// ReadAt reads data at off, verifying every chunk it reads.
func (a *File) ReadAt(p []byte, off int64) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for n < len(p) {
		if off >= a.size {
			return n, io.EOF
		}
		c := off / ChunkSize
		if err := a.load(c); err != nil {
			return n, err
		}
		k := copy(p[n:], a.buf[off-c*ChunkSize:])
		n += k
		off += int64(k)
	}
	return n, nil
}

// load reads and verifies chunk c into buf.
func (a *File) load(c int64) error {
	if a.at == c {
		return nil
	}
	a.at = -1
	n := min(ChunkSize, a.size-c*ChunkSize)
	if cap(a.buf) < int(n) {
		a.buf = make([]byte, n) // a small artifact's one chunk is small
	}
	a.buf = a.buf[:n]
	if err := a.readChunk(a.buf, c); err != nil {
		return err
	}
	a.at = c
	return nil
}

// readChunk reads chunk c into p (its length) and verifies it.
func (a *File) readChunk(p []byte, c int64) error {
	if _, err := a.f.ReadAt(p, c*ChunkSize); err != nil {
		return fmt.Errorf("artifact %s: chunk %d: %w", a.f.Name(), c, err)
	}
	if crc32.Checksum(p, castagnoli) != a.crcs[c] {
		return fmt.Errorf("artifact %s: chunk %d fails its CRC: %w", a.f.Name(), c, ErrCorrupt)
	}
	return nil
}

// Reader reads the data from its start.
func (a *File) Reader() io.Reader { return io.NewSectionReader(a, 0, a.size) }

// Bytes reads the whole data (for a small artifact), each chunk read
// and verified in place.
func (a *File) Bytes() ([]byte, error) {
	b := make([]byte, a.size)
	for c := int64(0); c*ChunkSize < a.size; c++ {
		if err := a.readChunk(b[c*ChunkSize:min((c+1)*ChunkSize, a.size)], c); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// verify reads every chunk.
func (a *File) verify() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range int64(len(a.crcs)) {
		if err := a.load(c); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file.
func (a *File) Close() error { return a.f.Close() }

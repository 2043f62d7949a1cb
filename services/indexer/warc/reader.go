// Package warc reads ARC (v1) and WARC (1.0, 1.1) files, plain or gzipped
// one member per record, as a stream of records with the offset and length
// each occupies in the file: what a CDX line points at. It is tolerant of
// the faults real archives have: it returns every record up to a fault, then
// a *FormatError saying what is wrong and where.
package warc

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Record is one archive record.
type Record struct {
	// Offset is where the record starts in the file: its gzip member's start
	// for a compressed file.
	Offset int64
	// Length is how many bytes of the file the record occupies: its gzip
	// member's compressed length, or for a plain file the header, block and
	// the separator after it.
	Length int64
	// Format is "warc" or "arc".
	Format string
	// Version is the record's version line ("WARC/1.0", "WARC/1.1"), or
	// "ARC/1".
	Version string
	// Header holds the WARC named fields; for an ARC record the fields its
	// header line gives, under the WARC names (WARC-Target-URI, WARC-Date
	// as 14 digits, WARC-IP-Address, Content-Type, Content-Length).
	Header Header
	// Block is the start of the record block: all of it up to
	// Limits.MaxHead bytes, the rest having been streamed through the
	// payload digest (Options.Digest) without being kept. It is valid until
	// the next call of Next.
	Block []byte
	// BlockLength is how many bytes of block were read (the declared
	// Content-Length unless Truncated).
	BlockLength int64
	// PayloadSHA1 is the SHA-1 of the block from the offset Options.Digest
	// named to its end, when Options.Digest asked for it.
	PayloadSHA1 []byte
	// Truncated is set when the block is shorter than its declared length
	// (the file ends or the gzip member ends early); Next reports the fault
	// after this record.
	Truncated bool

	blockEnd int64 // in a plain file: where the block ends
}

// Type is the record's WARC-Type; ARC records are "response", and an ARC
// file's first record (its filedesc) is "warcinfo".
func (r *Record) Type() string { return r.Header.Get("WARC-Type") }

// Header is a record's named fields, in file order.
type Header []Field

// Field is one named field.
type Field struct{ Name, Value string }

// Get returns the first value of a field, matched case-insensitively.
func (h Header) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// FormatError is a fault in the file: the records before it were read.
type FormatError struct {
	// Offset is where in the file the fault was found.
	Offset int64
	// Reason says what is wrong.
	Reason string
	// Err is the error of the underlying reader that ended the reading, if
	// that is what happened.
	Err error
}

func (e *FormatError) Error() string { return fmt.Sprintf("at offset %d: %s", e.Offset, e.Reason) }

// Unwrap returns Err.
func (e *FormatError) Unwrap() error { return e.Err }

// Limits bound what the reader takes from a file: every one is checked
// before the bytes it concerns are kept, and breaking one is a
// *FormatError naming it (the records before it were read).
type Limits struct {
	// MaxLine is the longest header line (a WARC named field, an ARC
	// header line), continuations apart.
	MaxLine int
	// MaxHeader is the most bytes of one record's header, continuation
	// lines included.
	MaxHeader int
	// MaxFields is the most named fields of one record's header.
	MaxFields int
	// MaxHead is how much of a block is kept in Record.Block; the rest is
	// streamed (through the payload digest when asked for) and dropped.
	MaxHead int
	// MaxBlock is the largest declared block (Content-Length); it is
	// streamed, never held whole.
	MaxBlock int64
	// MaxTail is the most bytes a gzip member may hold after its record's
	// block (blank space, normally a few bytes) before the reader stops.
	MaxTail int64
}

// DefaultLimits are the reader's bounds unless Options say otherwise.
var DefaultLimits = Limits{MaxLine: 64 << 10, MaxHeader: 1 << 20, MaxFields: 1000, MaxHead: 1 << 20, MaxBlock: 1 << 40, MaxTail: 1 << 20}

// Options configure a Reader.
type Options struct {
	// Limits bound the reading (zero fields take DefaultLimits').
	Limits Limits
	// Digest, if set, is asked for each record where its payload starts in
	// the block (given the block's first MaxHead bytes in rec.Block), and
	// ok=false for none: the reader then streams the block from there
	// through SHA-1 into rec.PayloadSHA1.
	Digest func(rec *Record) (start int, ok bool)

	// stream, if set, reads every member with the streaming inflate (a
	// test compares the two).
	stream bool
}

// wholeInflater inflates a gzip member whole from memory: a faster inflate
// than the streaming one, where the build has one (inflate_libdeflate.go).
type wholeInflater interface {
	// member inflates the member at the start of in: its content (valid
	// until the next call), how many bytes of in it took, and false when
	// in does not hold the whole member, the member is bad, or its content
	// is larger than the inflater holds (the streaming inflate then reads
	// it, and tells which).
	member(in []byte) (content []byte, used int, ok bool)
}

// newWholeInflater makes this build's whole-member inflater, or nil.
var newWholeInflater = func() wholeInflater { return nil }

// wholeBuffer is the file's buffer when members are inflated whole, and
// wholeMin the least of it a member is tried on before the buffer is
// refilled: a member longer than what the buffer holds is streamed.
const (
	wholeBuffer = 1 << 20
	wholeMin    = 256 << 10
)

// Reader reads records.
type Reader struct {
	src      *counter
	buf      *bufio.Reader // on src
	gz       *gzip.Reader
	whole    wholeInflater // nil: every member is streamed
	content  bytes.Reader  // a member inflated whole
	inflated []byte        // all of its content; nil for a streamed member
	member   *bufio.Reader // the current member's (or the plain file's) content
	gzipped  bool
	format   string       // of the records read so far
	fault    *FormatError // found after the record just returned
	done     bool
	lim      Limits
	digest   func(rec *Record) (int, bool)
	head     []byte // reused for Record.Block
	raw      []byte // reused for a WARC header's lines
	line     []byte // reused for a line longer than the buffer
	chunk    []byte // reused for streaming
}

// counter counts the bytes taken from the file. The reader's buffer sits
// on it, and the gzip decompressor reads that *bufio.Reader byte by byte
// as it needs (its fast path: exactly its member, no further); where the
// reading stands in the file is the count less what is buffered.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// pos is where the reading stands in the file.
func (r *Reader) pos() int64 { return r.src.n - int64(r.buf.Buffered()) }

// NewReader reads records from r, detecting gzip by its magic number,
// within DefaultLimits.
func NewReader(r io.Reader) (*Reader, error) { return NewReaderOptions(r, Options{}) }

// NewReaderOptions is NewReader with options.
func NewReaderOptions(r io.Reader, o Options) (*Reader, error) {
	// The magic number first: a gzipped file inflated whole has a
	// larger buffer.
	var magic [2]byte
	m, err := io.ReadFull(r, magic[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	gzipped := m == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	var whole wholeInflater
	size := 64 << 10
	if gzipped && !o.stream {
		if whole = newWholeInflater(); whole != nil {
			size = wholeBuffer
		}
	}
	cnt := &counter{r: io.MultiReader(bytes.NewReader(magic[:m]), r)}
	br := bufio.NewReaderSize(cnt, size)
	lim, d := o.Limits, DefaultLimits
	orDefault(&lim.MaxLine, d.MaxLine)
	orDefault(&lim.MaxHeader, d.MaxHeader)
	orDefault(&lim.MaxFields, d.MaxFields)
	orDefault(&lim.MaxHead, d.MaxHead)
	orDefault(&lim.MaxBlock, d.MaxBlock)
	orDefault(&lim.MaxTail, d.MaxTail)
	rd := &Reader{src: cnt, buf: br, lim: lim, digest: o.Digest, chunk: make([]byte, 32<<10)}
	rd.gzipped, rd.whole = gzipped, whole
	if !gzipped {
		rd.member = br
	}
	return rd, nil
}

// Next returns the next record, io.EOF after the last, or a *FormatError
// for a fault (after which it returns io.EOF).
func (r *Reader) Next() (*Record, error) {
	if r.done {
		return nil, io.EOF
	}
	rec, err := r.next()
	if err != nil && !errors.Is(err, io.EOF) {
		r.done = true
		var fe *FormatError
		if !errors.As(err, &fe) {
			err = &FormatError{Offset: r.pos(), Reason: err.Error(), Err: err}
		}
	}
	if errors.Is(err, io.EOF) {
		r.done = true
	}
	return rec, err
}

func (r *Reader) next() (*Record, error) {
	if !r.gzipped {
		if r.fault != nil {
			return nil, r.fault
		}
		rec, err := r.parse(r.member, r.pos)
		if err != nil {
			return nil, err
		}
		// pywb's (warcio's) lengths of records in plain files leave out the
		// separator after the block. We follow pywb (the rule where
		// indexers disagree); docs/indexing.md says so.
		rec.Length = rec.blockEnd - rec.Offset
		if rec.Truncated {
			r.fault = &FormatError{Offset: rec.Offset, Reason: "truncated record: block shorter than its length"}
		}
		return rec, nil
	}
	if r.fault != nil {
		return nil, r.fault
	}
	start := r.pos()
	if _, err := r.buf.Peek(1); errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err := r.openMember(start); err != nil {
		return nil, err
	}
	rec, err := r.parse(r.member, func() int64 { return start })
	if err != nil {
		return nil, err
	}
	if rec.Truncated {
		r.fault = &FormatError{Offset: start, Reason: "truncated record: block shorter than its length"}
	}
	// Read to the end of the member so that the count stands at its end,
	// in chunks, at most MaxTail bytes. Anything but blank space there is
	// another record in the same member: it has no offset of its own that
	// a reader could seek to, so it is a fault, reported after this record.
	var tail int64
	junk := false
	for {
		n, err := r.member.Read(r.chunk)
		tail += int64(n)
		if !junk && len(bytes.TrimSpace(r.chunk[:n])) > 0 {
			junk = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &FormatError{Offset: start, Reason: "corrupt gzip member: " + err.Error()}
		}
		if tail > r.lim.MaxTail {
			what := "blank space"
			if junk {
				what = "more records"
			}
			return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("gzip member holds more than %d bytes (MaxTail) of %s after its record", r.lim.MaxTail, what)}
		}
	}
	if junk && r.fault == nil {
		r.fault = &FormatError{Offset: start, Reason: "several records in one gzip member: the later ones cannot be addressed"}
	}
	rec.Offset = start
	rec.Length = r.pos() - start
	return rec, nil
}

// openMember sets r.member on the content of the gzip member at start: a
// member the buffer holds is inflated whole where the build can, any other
// streamed.
func (r *Reader) openMember(start int64) error {
	if r.whole != nil {
		if r.buf.Buffered() < wholeMin {
			r.buf.Peek(r.buf.Size()) // fills: what is left moves to the front, once a buffer
		}
		in, _ := r.buf.Peek(r.buf.Buffered())
		if content, used, ok := r.whole.member(in); ok {
			r.buf.Discard(used)
			r.inflated = content
			r.content.Reset(content)
			r.setMember(&r.content)
			return nil
		}
	}
	r.inflated = nil
	var err error
	if r.gz == nil {
		r.gz, err = gzip.NewReader(r.buf)
	} else {
		err = r.gz.Reset(r.buf)
	}
	if err != nil {
		return &FormatError{Offset: start, Reason: "not a gzip member (a file must be gzipped one record per member): " + err.Error()}
	}
	r.gz.Multistream(false)
	r.setMember(r.gz)
	return nil
}

// setMember reads the member's content from src, through one buffer for
// every member (not 64 KiB each).
func (r *Reader) setMember(src io.Reader) {
	if r.member == nil {
		r.member = bufio.NewReaderSize(src, 64<<10)
	} else {
		r.member.Reset(src)
	}
}

// parse reads one record from br; pos tells where in the file br stands.
func (r *Reader) parse(br *bufio.Reader, pos func() int64) (*Record, error) {
	// Skip blank lines between records; in a WARC file, also lines that are
	// not a record's start (a record whose Content-Length was wrong leaves
	// some): pywb resynchronises on the next "WARC/" line the same way.
	var line string
	var start int64
	skipped := 0
	for {
		start = pos()
		b, n, long, err := r.readLine(br)
		if errors.Is(err, io.EOF) && n == 0 {
			return nil, io.EOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		t := string(bytes.TrimRight(b, "\r\n"))
		switch {
		case !long && strings.TrimSpace(t) == "":
		case !long && strings.HasPrefix(t, "WARC/"):
			line = t
		case r.format == "warc" && skipped < maxResync:
			skipped += n
		case r.format == "arc" && (long || !looksLikeARCHeader(t)) && skipped < maxResync:
			// Lines of a filedesc block whose length was wrong.
			skipped += n
		case long:
			return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("record header line longer than %d bytes (MaxLine)", r.lim.MaxLine)}
		default:
			line = t
		}
		if line != "" {
			break
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
	}
	var rec *Record
	var err error
	switch {
	case strings.HasPrefix(line, "WARC/"):
		rec, err = r.parseWARC(br, line, start)
	case looksLikeARCHeader(line):
		rec, err = r.parseARC(br, line, start)
	default:
		return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("not a WARC or ARC record header: %q", truncate(line, 80))}
	}
	if err != nil {
		return nil, err
	}
	r.format = rec.Format
	rec.Offset = start
	rec.blockEnd = pos()
	// The separator after the block: CRLF CRLF after a WARC record, a
	// newline after an ARC record; tolerated when missing.
	for range 2 {
		if b, err := br.Peek(2); err == nil && bytes.Equal(b, []byte("\r\n")) {
			br.Discard(2)
		} else if err == nil && b[0] == '\n' || len(b) == 1 && b[0] == '\n' {
			br.Discard(1)
		}
		if rec.Format == "arc" {
			break
		}
	}
	return rec, nil
}

// looksLikeARCHeader reports whether a line can start an ARC record: a URL
// (with a scheme) followed by at least four fields.
func looksLikeARCHeader(line string) bool {
	f := strings.Fields(line)
	return len(f) >= 5 && strings.Contains(f[0], ":")
}

// maxResync bounds the junk skipped looking for the next WARC record.
const maxResync = 1 << 20

func (r *Reader) parseWARC(br *bufio.Reader, version string, start int64) (*Record, error) {
	rec := &Record{Format: "warc", Version: version}
	size := len(version)
	// The header's lines are checked as they are read and kept, each
	// without its line end and with a newline after it, in one buffer;
	// then made one string, which every name and value is a part of.
	raw := r.raw[:0]
	fields := 0
	for {
		l, n, long, err := r.readLine(br)
		if long {
			return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("WARC header line longer than %d bytes (MaxLine)", r.lim.MaxLine)}
		}
		if err != nil {
			return nil, &FormatError{Offset: start, Reason: "truncated WARC header"}
		}
		if size += n; size > r.lim.MaxHeader {
			return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("WARC header longer than %d bytes (MaxHeader)", r.lim.MaxHeader)}
		}
		l = bytes.TrimRight(l, "\r\n")
		if len(l) == 0 {
			break
		}
		if (l[0] == ' ' || l[0] == '\t') && fields > 0 { // continuation line
			raw = append(append(raw, l...), '\n')
			continue
		}
		if bytes.IndexByte(l, ':') < 0 {
			return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("WARC header line without a colon: %q", truncate(string(l), 80))}
		}
		if fields == r.lim.MaxFields {
			return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("WARC header of more than %d fields (MaxFields)", r.lim.MaxFields)}
		}
		fields++
		raw = append(append(raw, l...), '\n')
	}
	r.raw = raw
	rec.Header = make(Header, 0, fields)
	var cont []string // continuation lines of the last field
	flush := func() {
		if len(cont) > 0 {
			f := &rec.Header[len(rec.Header)-1]
			f.Value = f.Value + " " + strings.Join(cont, " ")
			cont = cont[:0]
		}
	}
	for rest := string(raw); rest != ""; {
		var l string
		l, rest, _ = strings.Cut(rest, "\n")
		if l[0] == ' ' || l[0] == '\t' {
			cont = append(cont, strings.TrimSpace(l))
			continue
		}
		flush()
		name, value, _ := strings.Cut(l, ":")
		rec.Header = append(rec.Header, Field{strings.TrimSpace(name), strings.TrimSpace(value)})
	}
	flush()
	n, err := strconv.ParseInt(rec.Header.Get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("bad Content-Length %q", truncate(rec.Header.Get("Content-Length"), 40))}
	}
	if n > r.lim.MaxBlock {
		return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("Content-Length %d is beyond %d (MaxBlock)", n, r.lim.MaxBlock)}
	}
	return rec, r.readBlock(br, rec, n)
}

// readBlock reads a block of n bytes: the first MaxHead into rec.Block,
// the rest streamed through the payload digest if one is asked for. A short
// block is kept and flagged.
func (r *Reader) readBlock(br *bufio.Reader, rec *Record, n int64) error {
	h := int(min(n, int64(r.lim.MaxHead)))
	var got int
	var err error
	if b, ok := r.inflatedBlock(br, h); ok {
		rec.Block, got = b, h
	} else {
		if cap(r.head) < h {
			r.head = make([]byte, h)
		}
		rec.Block = r.head[:h]
		got, err = io.ReadFull(br, rec.Block)
	}
	rec.Block, rec.BlockLength = rec.Block[:got], int64(got)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		rec.Truncated = got < h
		err = nil
	}
	if err != nil {
		return err
	}
	var sum hash.Hash
	if r.digest != nil {
		if start, ok := r.digest(rec); ok {
			sum = sha1.New()
			sum.Write(rec.Block[min(max(start, 0), len(rec.Block)):])
		}
	}
	if !rec.Truncated && n > int64(h) {
		var w io.Writer = io.Discard
		if sum != nil {
			w = sum
		}
		m, err := io.CopyBuffer(w, io.LimitReader(br, n-int64(h)), r.chunk)
		rec.BlockLength += m
		if err != nil {
			return err
		}
		rec.Truncated = m < n-int64(h)
	}
	if sum != nil {
		rec.PayloadSHA1 = sum.Sum(nil)
	}
	return nil
}

// inflatedBlock is, when br reads a member inflated whole that holds its
// next h bytes, those bytes where the member's content has them (not
// copied), br moved past them.
func (r *Reader) inflatedBlock(br *bufio.Reader, h int) ([]byte, bool) {
	if r.inflated == nil || br != r.member {
		return nil, false
	}
	buffered := br.Buffered()
	at := len(r.inflated) - r.content.Len() - buffered
	if at+h > len(r.inflated) {
		return nil, false // short: read, and flagged, as streamed
	}
	if h <= buffered {
		br.Discard(h)
	} else {
		// Nothing is left in br's buffer: it reads on from where the
		// content reader is moved.
		br.Discard(buffered)
		r.content.Seek(int64(h-buffered), io.SeekCurrent)
	}
	return r.inflated[at : at+h], true
}

func (r *Reader) parseARC(br *bufio.Reader, line string, start int64) (*Record, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("not a WARC or ARC record header: %q", truncate(line, 80))}
	}
	// URL IP-address Archive-date Content-type Archive-length, read from the
	// right so that a URL with spaces stays whole.
	// A length that is no number (or negative) means no block, as pywb reads it.
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil || n < 0 {
		n = 0
	}
	if n > r.lim.MaxBlock {
		return nil, &FormatError{Offset: start, Reason: fmt.Sprintf("ARC length %d is beyond %d (MaxBlock)", n, r.lim.MaxBlock)}
	}
	url := strings.Join(f[:len(f)-4], " ")
	rec := &Record{Format: "arc", Version: "ARC/1", Header: Header{
		{"WARC-Type", "response"},
		{"WARC-Target-URI", url},
		{"WARC-IP-Address", f[len(f)-4]},
		{"WARC-Date", f[len(f)-3]},
		{"Content-Type", f[len(f)-2]},
		{"Content-Length", f[len(f)-1]},
	}}
	if strings.HasPrefix(url, "filedesc://") {
		rec.Header[0].Value = "warcinfo"
	}
	return rec, r.readBlock(br, rec, n)
}

// orDefault sets *v to d unless *v is positive.
func orDefault[T int | int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// readLine reads a line (with its newline) of at most MaxLine bytes, valid
// until the next read; a longer one is read to its end and dropped,
// reported as long with its length n.
func (r *Reader) readLine(br *bufio.Reader) (line []byte, n int, long bool, err error) {
	frag, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) { // the line is in br's buffer
		if len(frag) > r.lim.MaxLine {
			return nil, len(frag), true, err
		}
		return frag, len(frag), false, err
	}
	buf := r.line[:0]
	for {
		n += len(frag)
		if !long && len(buf)+len(frag) <= r.lim.MaxLine {
			buf = append(buf, frag...)
		} else {
			long, buf = true, buf[:0]
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			r.line = buf
			if long {
				return nil, n, true, err
			}
			return buf, n, false, err
		}
		frag, err = br.ReadSlice('\n')
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

package cdxindex

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// A ZipNum cluster is the layout of the Wayback indexes at archive scale
// (the Internet Archive's, pywb's and OpenWayback's "zipnum"): sorted CDX
// lines cut into blocks of a few thousand lines, each block one gzip
// member, the members concatenated into part files; a summary NAME.idx with
// a line per block (its first key, its part, offset, length and number,
// tab-separated) and NAME.loc naming each part's location. A reader keeps
// the summary in memory and reads one or two blocks per query.

// DefaultBlockLines is how many CDX lines a block holds (pywb's and the
// Internet Archive's clusters use 3,000).
const DefaultBlockLines = 3000

// DefaultPartBytes is about how many compressed bytes a part file holds
// before the next part starts.
const DefaultPartBytes = 1 << 30

// ZipNumWriter writes sorted CDX lines as a ZipNum cluster into a local
// directory. It is an io.Writer of newline-terminated lines (what Merge
// writes); the CDX header line is dropped. Close ends the last block and
// writes the summary and the location file.
type ZipNumWriter struct {
	dir, name  string
	blockLines int
	partBytes  int64

	block      bytes.Buffer // the current block's lines
	blockN     int          // lines in the current block
	firstKey   string       // the current block's first key
	partial    []byte       // a line not yet ended by a newline
	part       *os.File
	partName   string
	parts      []string
	idx        *bufio.Writer
	idxFile    *os.File
	gz         *gzip.Writer
	counter    countWriter
	lines      int64
	lastLine   []byte
	blocks     int64
	firstBlock string
	compressed int64
	closed     bool
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// NewZipNumWriter starts a cluster NAME in dir (which must exist):
// dir/NAME.idx, dir/NAME.loc and dir/NAME-00000.cdx.gz onwards.
// blockLines and partBytes of 0 take the defaults.
func NewZipNumWriter(dir, name string, blockLines int, partBytes int64) (*ZipNumWriter, error) {
	if blockLines <= 0 {
		blockLines = DefaultBlockLines
	}
	if partBytes <= 0 {
		partBytes = DefaultPartBytes
	}
	if strings.ContainsAny(name, "/\t\n") || name == "" {
		return nil, fmt.Errorf("cluster name %q: a name without slashes, tabs or newlines", name)
	}
	idx, err := os.Create(filepath.Join(dir, name+".idx"))
	if err != nil {
		return nil, err
	}
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
	return &ZipNumWriter{dir: dir, name: name, blockLines: blockLines, partBytes: partBytes,
		idxFile: idx, idx: bufio.NewWriter(idx), gz: gz}, nil
}

// Write takes CDX lines; a line may span calls.
func (z *ZipNumWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			z.partial = append(z.partial, p...)
			break
		}
		line := p[:i]
		if len(z.partial) > 0 {
			z.partial = append(z.partial, line...)
			line = z.partial
		}
		if err := z.add(line); err != nil {
			return 0, err
		}
		z.partial = z.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// add appends one line to the current block.
func (z *ZipNumWriter) add(line []byte) error {
	if len(line) == 0 || bytes.HasPrefix(line, []byte(" CDX ")) {
		return nil
	}
	if z.blockN == 0 {
		z.firstKey = idxKey(line)
		if z.blocks == 0 {
			z.firstBlock = z.firstKey
		}
	}
	z.lastLine = append(z.lastLine[:0], line...)
	z.block.Write(line)
	z.block.WriteByte('\n')
	z.blockN++
	z.lines++
	if z.blockN >= z.blockLines {
		return z.flushBlock()
	}
	return nil
}

// idxKey is a line's summary key: its URL key and timestamp.
func idxKey(line []byte) string {
	k, rest, _ := bytes.Cut(line, []byte(" "))
	ts, _, _ := bytes.Cut(rest, []byte(" "))
	return string(k) + " " + string(ts)
}

// flushBlock compresses the current block as one gzip member at the end of
// the current part and records it in the summary.
func (z *ZipNumWriter) flushBlock() error {
	if z.blockN == 0 {
		return nil
	}
	if z.part == nil || z.counter.n >= z.partBytes {
		if err := z.closePart(); err != nil {
			return err
		}
		z.partName = fmt.Sprintf("%s-%05d", z.name, len(z.parts))
		f, err := os.Create(filepath.Join(z.dir, z.partName+".cdx.gz"))
		if err != nil {
			return err
		}
		z.part = f
		z.parts = append(z.parts, z.partName)
		z.counter = countWriter{w: f}
	}
	start := z.counter.n
	z.gz.Reset(&z.counter)
	if _, err := z.gz.Write(z.block.Bytes()); err != nil {
		return err
	}
	if err := z.gz.Close(); err != nil {
		return fmt.Errorf("write block: %w", err)
	}
	length := z.counter.n - start
	z.blocks++
	fmt.Fprintf(z.idx, "%s\t%s\t%d\t%d\t%d\n", z.firstKey, z.partName, start, length, z.blocks)
	z.compressed += length
	z.block.Reset()
	z.blockN = 0
	return nil
}

func (z *ZipNumWriter) closePart() error {
	if z.part == nil {
		return nil
	}
	err := z.part.Close()
	z.part = nil
	return err
}

// Close ends the last block and part and writes NAME.loc (each part's
// location, relative to the summary, as pywb resolves it).
func (z *ZipNumWriter) Close() error {
	if z.closed {
		return nil
	}
	z.closed = true
	if len(z.partial) > 0 {
		if err := z.add(z.partial); err != nil {
			return err
		}
	}
	err := z.flushBlock()
	if cerr := z.closePart(); err == nil {
		err = cerr
	}
	if ferr := z.idx.Flush(); err == nil {
		err = ferr
	}
	if cerr := z.idxFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	var loc bytes.Buffer
	for _, p := range z.parts {
		fmt.Fprintf(&loc, "%s\t%s.cdx.gz\n", p, p)
	}
	return os.WriteFile(filepath.Join(z.dir, z.name+".loc"), loc.Bytes(), 0o644)
}

// Lines, Blocks and Bytes are what was written: CDX lines, blocks and
// compressed bytes.
func (z *ZipNumWriter) Lines() int64  { return z.lines }
func (z *ZipNumWriter) Blocks() int64 { return z.blocks }
func (z *ZipNumWriter) Bytes() int64  { return z.compressed }

// FirstKey and LastKey are the summary keys (URL key and timestamp) of
// the first and the last line written ("" when none was).
func (z *ZipNumWriter) FirstKey() string { return z.firstBlock }
func (z *ZipNumWriter) LastKey() string {
	if z.lines == 0 {
		return ""
	}
	return idxKey(z.lastLine)
}

// Files are the cluster's files, relative to its directory: the summary,
// the location file and the parts.
func (z *ZipNumWriter) Files() []string {
	out := []string{z.name + ".idx", z.name + ".loc"}
	for _, p := range z.parts {
		out = append(out, p+".cdx.gz")
	}
	return out
}

// Block is one line of a ZipNum summary.
type Block struct {
	// Key is the block's first URL key and timestamp.
	Key string
	// Part names the part file (through the .loc file).
	Part string
	// Offset and Length place the block's gzip member in its part.
	Offset, Length int64
	// Number counts the blocks from 1.
	Number int64
}

// ParseSummary reads a ZipNum summary (NAME.idx).
func ParseSummary(r io.Reader) ([]Block, error) {
	var out []Block
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 4 {
			return nil, fmt.Errorf("summary line %d: %d fields, want key, part, offset, length[, number]", n, len(f))
		}
		off, err1 := strconv.ParseInt(f[2], 10, 64)
		length, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || off < 0 || length <= 0 {
			return nil, fmt.Errorf("summary line %d: offset %q and length %q are not byte counts", n, f[2], f[3])
		}
		b := Block{Key: f[0], Part: f[1], Offset: off, Length: length, Number: int64(n)}
		if len(f) > 4 {
			if num, err := strconv.ParseInt(f[4], 10, 64); err == nil {
				b.Number = num
			}
		}
		if len(out) > 0 && b.Key < out[len(out)-1].Key {
			return nil, fmt.Errorf("summary line %d: key %q sorts before the previous block's", n, b.Key)
		}
		out = append(out, b)
	}
	return out, sc.Err()
}

// ParseLoc reads a ZipNum location file: part name, tab, location (the
// first of several).
func ParseLoc(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(strings.TrimRight(sc.Text(), "\r"), "\t")
		if len(f) < 2 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("location line %d: want part, tab, location", n)
		}
		out[f[0]] = f[1]
	}
	return out, sc.Err()
}

// Cluster is a ZipNum cluster opened for queries: its summary in memory,
// its blocks read through open.
type Cluster struct {
	blocks []Block
	loc    map[string]string
	open   func(location string) (io.ReaderAt, error)
}

// OpenCluster reads a cluster's summary and location file; open gives
// random access to a part, by the location the .loc file names.
func OpenCluster(summary, loc io.Reader, open func(location string) (io.ReaderAt, error)) (*Cluster, error) {
	blocks, err := ParseSummary(summary)
	if err != nil {
		return nil, err
	}
	locs, err := ParseLoc(loc)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if _, ok := locs[b.Part]; !ok {
			return nil, fmt.Errorf("block %d is in part %q, which the location file does not name", b.Number, b.Part)
		}
	}
	return &Cluster{blocks: blocks, loc: locs, open: open}, nil
}

// Blocks is the cluster's summary.
func (c *Cluster) Blocks() []Block { return c.blocks }

// Within is the query's key range narrowed to [lo, hi) ("": that side
// left as the query has it): a page of an answer, or a window of it.
func (q Query) Within(lo, hi string) (string, string) {
	qlo, qhi := q.bounds()
	if lo > qlo {
		qlo = lo
	}
	if hi != "" && (qhi == "" || hi < qhi) {
		qhi = hi
	}
	return qlo, qhi
}

// bounds are a query's key range: lines >= lo and < hi (hi "" is open).
func (q Query) bounds() (lo, hi string) {
	lo = q.Key
	if !q.Prefix {
		lo += " "
		if q.From != "" {
			lo += q.From
		}
		return lo, q.Key + "!" // ' ' < '!': every line of the key sorts before
	}
	return lo, incLast(q.Key)
}

// incLast is the least string greater than every string with prefix s
// ("" when there is none: s is all 0xff bytes).
func incLast(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// BlockRange is the blocks a key range [lo, hi) may have lines in: from
// the block before the first whose key is >= lo (lines of lo may end it)
// up to, not including, the first whose key is >= hi.
func (c *Cluster) BlockRange(lo, hi string) (first, end int) {
	i, _ := slices.BinarySearchFunc(c.blocks, lo, func(b Block, k string) int { return strings.Compare(b.Key, k) })
	first = max(0, i-1)
	end = len(c.blocks)
	if hi != "" {
		end, _ = slices.BinarySearchFunc(c.blocks, hi, func(b Block, k string) int { return strings.Compare(b.Key, k) })
	}
	if end < first {
		end = first
	}
	return first, end
}

// readBlock reads block i's gzip member (its compressed bytes: one read,
// the part closed at once).
func (c *Cluster) readBlock(i int) ([]byte, error) {
	b := c.blocks[i]
	if b.Length > maxBlockBytes {
		return nil, fmt.Errorf("block %d of %s: %d bytes, past %d MiB", b.Number, b.Part, b.Length, maxBlockBytes>>20)
	}
	ra, err := c.open(c.loc[b.Part])
	if err != nil {
		return nil, fmt.Errorf("open part %s: %w", b.Part, err)
	}
	if cl, ok := ra.(io.Closer); ok {
		defer cl.Close()
	}
	buf := make([]byte, b.Length)
	if n, err := ra.ReadAt(buf, b.Offset); n < len(buf) {
		return nil, fmt.Errorf("block %d of %s: read %d of %d bytes: %w", b.Number, b.Part, n, len(buf), err)
	}
	return buf, nil
}

// maxBlockBytes bounds a block, compressed and inflated (3,000 lines of
// at most about a KiB; a hostile or corrupt block stops here).
const maxBlockBytes = 64 << 20

// ClusterCursor reads the lines of a query from a cluster, a block at a
// time, in order, inflating a block only as far as the query reads it.
type ClusterCursor struct {
	c        *Cluster
	q        Query
	lo, hi   string
	loB, hiB []byte
	next     int
	end      int
	zr       *gzip.Reader
	br       *bufio.Reader
	inBlock  bool
	long     []byte
	done     bool
	err      error
	// BlocksRead counts the blocks read so far.
	BlocksRead int
}

// Cursor positions a cursor at the query's first line (q.Limit is not
// applied).
func (c *Cluster) Cursor(q Query) *ClusterCursor { return c.CursorRange(q, "", "") }

// CursorRange is a cursor over the query's lines within [lo, hi) ("":
// unbounded), a page of an answer.
func (c *Cluster) CursorRange(q Query, lo, hi string) *ClusterCursor {
	qlo, qhi := q.Within(lo, hi)
	first, end := c.BlockRange(qlo, qhi)
	return &ClusterCursor{c: c, q: q, lo: qlo, hi: qhi, loB: []byte(qlo), hiB: []byte(qhi), next: first, end: end}
}

// Next returns the next selected line; false at the end (see Err).
func (cc *ClusterCursor) Next() (string, bool) {
	for !cc.done {
		if !cc.inBlock {
			if cc.next >= cc.end {
				cc.done = true
				break
			}
			if err := cc.open(cc.next); err != nil {
				cc.err, cc.done = err, true
				break
			}
			cc.BlocksRead++
			cc.next++
		}
		line, err := cc.readLine()
		if err == io.EOF {
			cc.inBlock = false
			if len(line) == 0 {
				continue
			}
		} else if err != nil {
			cc.err, cc.done = fmt.Errorf("block %d: %w", cc.c.blocks[cc.next-1].Number, err), true
			break
		}
		if len(line) == 0 || bytes.Compare(line, cc.loB) < 0 {
			continue
		}
		if cc.hi != "" && bytes.Compare(line, cc.hiB) >= 0 {
			cc.done = true
			break
		}
		if s := string(line); cc.q.selects(s) {
			return s, true
		}
	}
	return "", false
}

// open starts inflating block i.
func (cc *ClusterCursor) open(i int) error {
	raw, err := cc.c.readBlock(i)
	if err != nil {
		return err
	}
	if cc.zr == nil {
		cc.zr, err = gzip.NewReader(bytes.NewReader(raw))
	} else {
		err = cc.zr.Reset(bytes.NewReader(raw))
	}
	if err != nil {
		return fmt.Errorf("block %d: %w", cc.c.blocks[i].Number, err)
	}
	cc.zr.Multistream(false)
	lr := io.LimitReader(cc.zr, maxBlockBytes)
	if cc.br == nil {
		cc.br = bufio.NewReaderSize(lr, 64<<10)
	} else {
		cc.br.Reset(lr)
	}
	cc.inBlock = true
	return nil
}

// readLine reads the block's next line without its newline (a line longer
// than the reader's buffer is gathered, up to maxLine).
func (cc *ClusterCursor) readLine() ([]byte, error) {
	line, err := cc.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		cc.long = append(cc.long[:0], line...)
		for err == bufio.ErrBufferFull && len(cc.long) <= maxLine {
			line, err = cc.br.ReadSlice('\n')
			cc.long = append(cc.long, line...)
		}
		if len(cc.long) > maxLine {
			return nil, fmt.Errorf("a line longer than %d MiB", maxLine>>20)
		}
		line = cc.long
	}
	return bytes.TrimSuffix(line, []byte("\n")), err
}

// selects applies the query's time bounds to a line within its key range.
func (q Query) selects(line string) bool {
	_, rest, _ := strings.Cut(line, " ")
	ts, _, _ := strings.Cut(rest, " ")
	if q.From != "" && ts < q.From {
		return false
	}
	if q.To != "" && ts > q.To && !strings.HasPrefix(ts, q.To) {
		return false
	}
	return true
}

// Err is the error that ended the cursor, if any.
func (cc *ClusterCursor) Err() error { return cc.err }

// ScanCluster reads a whole cluster in order, part after part, as plain CDX lines
// (the merge's input); open gives a part's whole content.
func ScanCluster(parts []string, open func(part string) (io.ReadCloser, error)) io.ReadCloser {
	return &clusterScan{parts: parts, open: open}
}

type clusterScan struct {
	parts []string
	open  func(part string) (io.ReadCloser, error)
	cur   io.ReadCloser
	zr    *gzip.Reader
}

func (s *clusterScan) Read(p []byte) (int, error) {
	for {
		if s.zr == nil {
			if len(s.parts) == 0 {
				return 0, io.EOF
			}
			rc, err := s.open(s.parts[0])
			if err != nil {
				return 0, fmt.Errorf("open part %s: %w", s.parts[0], err)
			}
			s.cur = rc
			zr, err := gzip.NewReader(bufio.NewReaderSize(rc, 256<<10))
			if err != nil {
				rc.Close()
				s.cur = nil
				return 0, fmt.Errorf("part %s: %w", s.parts[0], err)
			}
			s.zr = zr
			s.parts = s.parts[1:]
		}
		n, err := s.zr.Read(p)
		if err == io.EOF {
			s.zr.Close()
			s.cur.Close()
			s.zr, s.cur = nil, nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (s *clusterScan) Close() error {
	if s.cur != nil {
		s.zr.Close()
		return s.cur.Close()
	}
	return nil
}

// DropLines reads r's lines, leaving out those drop selects (the lines of
// a withdrawn or re-indexed file, when clusters merge).
func DropLines(r io.ReadCloser, drop func(line []byte) bool) io.ReadCloser {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	return &dropReader{rc: r, sc: sc, drop: drop}
}

type dropReader struct {
	rc   io.ReadCloser
	sc   *bufio.Scanner
	drop func([]byte) bool
	buf  []byte
}

func (d *dropReader) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		if !d.sc.Scan() {
			if err := d.sc.Err(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		if l := d.sc.Bytes(); !d.drop(l) {
			d.buf = append(append(d.buf[:0], l...), '\n')
		}
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}

func (d *dropReader) Close() error { return d.rc.Close() }

// LineFile is the archive file a CDX line names (its last field).
func LineFile(line []byte) string {
	return string(line[bytes.LastIndexByte(line, ' ')+1:])
}

// Overlaps reports whether lines with summary keys from first to last
// (URL key and timestamp) may hold lines the query selects.
func (q Query) Overlaps(first, last string) bool {
	lo, hi := q.bounds()
	// last is a line's key and timestamp: the line itself may sort after
	// lo when last is a prefix of lo (lo has the key's trailing space).
	if last < lo && !strings.HasPrefix(lo, last) {
		return false
	}
	return hi == "" || first < hi
}

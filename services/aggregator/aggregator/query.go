package aggregator

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// Generation describes one cluster of the index.
type Generation struct {
	// Level is "L0" (a build of new outputs), "L1" (a merge of L0
	// clusters) and so on.
	Level string `json:"level"`
	// Key is the cluster's summary (NAME.idx) in the blob store; its
	// location file and parts are beside it.
	Key string `json:"key"`
	// Lines, Blocks and Bytes are its size (Bytes compressed).
	Lines  int64 `json:"lines"`
	Blocks int64 `json:"blocks"`
	Bytes  int64 `json:"bytes"`
	// Sources is how many outputs were merged into it.
	Sources int64 `json:"sources"`
	// BuiltAt is when it was built.
	BuiltAt time.Time `json:"built_at"`
}

// Generations lists the live clusters, the largest level first.
func (a *Aggregator) Generations(ctx context.Context) ([]Generation, error) {
	rows, err := a.db.Query(ctx, `SELECT 'L' || level, name, parts, lines, blocks, bytes, sources, built_at FROM aggregator.clusters ORDER BY level DESC, lo`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Generation, error) {
		var g Generation
		var name string
		var parts int
		err := r.Scan(&g.Level, &name, &parts, &g.Lines, &g.Blocks, &g.Bytes, &g.Sources, &g.BuiltAt)
		g.Key = a.files(name, parts)[0]
		return g, err
	})
}

// live is a cluster a query reads.
type live struct {
	row clusterRow
	c   *cdxindex.Cluster
}

// liveClusters lists the clusters and opens each (its summary read once,
// then kept in memory until the cluster is merged away).
func (a *Aggregator) liveClusters(ctx context.Context) ([]live, error) {
	rows, err := a.db.Query(ctx, `SELECT id, level, name, parts, lo, hi, lines, blocks, bytes, sources, first_key, last_key
		FROM aggregator.clusters ORDER BY level DESC, lo`)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[clusterRow])
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	out := make([]live, 0, len(list))
	for _, r := range list {
		c, err := a.openCluster(ctx, r)
		if err != nil {
			if a.unreadable(ctx, r.Name, err) {
				continue // a query answers without it, marked incomplete
			}
			return nil, err
		}
		out = append(out, live{r, c})
	}
	a.clustersMu.Lock()
	for name := range a.clusters {
		if !slices.ContainsFunc(list, func(r clusterRow) bool { return r.Name == name }) {
			delete(a.clusters, name) // merged away
		}
	}
	a.clustersMu.Unlock()
	return out, nil
}

// openCluster opens a cluster from its summary and location file.
func (a *Aggregator) openCluster(ctx context.Context, r clusterRow) (*cdxindex.Cluster, error) {
	a.clustersMu.Lock()
	c, ok := a.clusters[r.Name]
	a.clustersMu.Unlock()
	if ok {
		return c, nil
	}
	keys := a.files(r.Name, r.Parts)
	read := func(key string) (io.ReadCloser, error) {
		rc, _, err := a.blob.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", key, err)
		}
		return rc, nil
	}
	idx, err := read(keys[0])
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	loc, err := read(keys[1])
	if err != nil {
		return nil, err
	}
	defer loc.Close()
	dir := a.cfg.Prefix + r.Name + "/"
	// A block is one ranged read of its part (S3: one GET, no stat).
	c, err = cdxindex.OpenCluster(io.LimitReader(idx, maxSummary), io.LimitReader(loc, 1<<20), func(location string) (io.ReaderAt, error) {
		return blob.ReaderAt(context.WithoutCancel(ctx), a.blob, dir+location)
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", r.Name, err)
	}
	a.clustersMu.Lock()
	a.clusters[r.Name] = c
	a.clustersMu.Unlock()
	return c, nil
}

// maxSummary bounds a summary read into memory: a line per block of 3,000
// CDX lines, so 256 MiB is some 10^10 lines.
const maxSummary = 256 << 20

// maskBatch is how many lines a query checks against the masks at once.
const maskBatch = 256

// Lookup answers a query from every cluster: lines merged in order,
// identical lines once, masked lines (a withdrawn or re-indexed file's,
// in the builds that hold them) left out, then those keep takes (nil:
// all), at most q.Limit. A cluster whose keys are all outside the query's
// is not read.
func (a *Aggregator) Lookup(ctx context.Context, q cdxindex.Query, keep func(line string) bool) ([]string, error) {
	return a.lookupRange(ctx, q, "", "", q.Limit, nil, keep)
}

// budget is how many more lines a query may read, kept or not (a filter
// that keeps none, a collapse, must not read a whole prefix for one
// request); Spent is set once it ran out before the answer ended, and
// Last is the last line it let be read (where a resumed answer goes on).
type budget struct {
	Left  int
	Spent bool
	Last  string
}

// take counts line read, and reports whether there was room for it.
func (b *budget) take(line string) bool {
	if b == nil {
		return true
	}
	if b.Left <= 0 {
		b.Spent = true
		return false
	}
	b.Left--
	b.Last = line
	return true
}

// lookupRange is Lookup within the lines [lo, hi) ("": unbounded),
// reading at most what read allows (nil: no bound but the limit).
func (a *Aggregator) lookupRange(ctx context.Context, q cdxindex.Query, lo, hi string, limit int, read *budget, keep func(string) bool) ([]string, error) {
	clusters, err := a.liveClusters(ctx)
	if err != nil {
		return nil, err
	}
	return a.readRange(ctx, clusters, q, lo, hi, limit, read, keep)
}

// readRange is lookupRange over clusters already listed.
func (a *Aggregator) readRange(ctx context.Context, clusters []live, q cdxindex.Query, lo, hi string, limit int, read *budget, keep func(string) bool) ([]string, error) {
	srcs := make([]source, 0, len(clusters))
	for _, l := range clusters {
		if l.row.Lines == 0 || !q.Overlaps(l.row.FirstKey, l.row.LastKey) {
			continue
		}
		srcs = append(srcs, l.source(l.c.CursorRange(q, lo, hi)))
	}
	return a.mergeCursors(ctx, srcs, limit, read, keep)
}

// Pages divides a query's answer into pages of size blocks of the cluster
// that holds the most blocks of it (the largest, once the levels have
// merged): page i is the lines from its block first+i*size up to the
// block a page later, in every cluster.
type Pages struct {
	// Count is how many pages there are; Blocks how many blocks of the
	// paging cluster the answer spans.
	Count, Blocks int
	// paging is the cluster that pages, first the answer's first block
	// in it and size a page's blocks: page i begins at block first+i*size
	// (found when read, not listed for every page: a page of one block
	// over a broad query would list a bound per block of the index).
	paging      *cdxindex.Cluster
	first, size int
	// clusters are the clusters counted, which Page reads.
	clusters []live
}

// bound is the key at which page i begins ("" for the first page and past
// the last).
func (p Pages) bound(i int) string {
	if i <= 0 || i >= p.Count {
		return ""
	}
	return p.paging.Blocks()[p.first+i*p.size].Key
}

// PageBlocks are the paging cluster's blocks that page i spans (pywb's
// showPagedIndex answers their summary lines).
func (p Pages) PageBlocks(i int) []cdxindex.Block {
	if i < 0 || i >= p.Count {
		return nil
	}
	lo := p.first + i*p.size
	return p.paging.Blocks()[lo:min(lo+p.size, p.first+p.Blocks)]
}

// Pages counts a query's pages of size blocks (pywb's showNumPages).
func (a *Aggregator) Pages(ctx context.Context, q cdxindex.Query, size int) (Pages, error) {
	clusters, err := a.liveClusters(ctx)
	if err != nil {
		return Pages{}, err
	}
	best, first, end := widest(clusters, q, "", "")
	if best == nil || end == first {
		return Pages{}, nil
	}
	p := Pages{Blocks: end - first, clusters: clusters, paging: best, first: first, size: size}
	p.Count = (p.Blocks + size - 1) / size
	return p, nil
}

// widest is the cluster holding the most blocks of the query's lines in
// [lo, hi) ("": the query's own bounds), and those blocks [first, end):
// its block keys cut pages and backward windows (nil if no cluster holds
// any).
func widest(clusters []live, q cdxindex.Query, lo, hi string) (best *cdxindex.Cluster, first, end int) {
	qlo, qhi := q.Within(lo, hi)
	for _, l := range clusters {
		if l.row.Lines == 0 || !q.Overlaps(l.row.FirstKey, l.row.LastKey) {
			continue
		}
		f, e := l.c.BlockRange(qlo, qhi)
		if best == nil || e-f > end-first {
			best, first, end = l.c, f, e
		}
	}
	return best, first, end
}

// Page reads page i of a query's answer, filtered by keep.
func (a *Aggregator) Page(ctx context.Context, q cdxindex.Query, p Pages, i int, keep func(string) bool) ([]string, error) {
	lo, hi := p.bound(i), p.bound(i+1)
	return a.readRange(ctx, p.clusters, q, lo, hi, 0, nil, keep)
}

// mergeCursors merges the sources' cursors in byte order, as they are read: the query stops reading once
// it has limit lines (0: no limit) or has read what read allows, kept or
// not, or its context ends (checked at every line: a costly filter runs
// on one line past a deadline at most).
func (a *Aggregator) mergeCursors(ctx context.Context, srcs []source, limit int, read *budget, keep func(string) bool) ([]string, error) {
	var out []string
	var ctxErr error
	err := a.eachLine(ctx, srcs, func(line string) bool {
		if ctxErr = ctx.Err(); ctxErr != nil || !read.take(line) {
			return false
		}
		if keep == nil || keep(line) {
			out = append(out, line)
		}
		return limit <= 0 || len(out) < limit
	})
	if err == nil {
		err = ctxErr
	}
	return out, err
}

// source is a cursor over a cluster, with the cluster's name and the
// builds it holds (lo to hi).
type source struct {
	c      *cdxindex.ClusterCursor
	name   string
	lo, hi int64
}

func (l live) source(c *cdxindex.ClusterCursor) source {
	return source{c: c, name: l.row.Name, lo: l.row.Lo, hi: l.row.Hi}
}

// eachLine merges the sources' cursors in byte order, as they are read,
// identical lines once, masked and excluded lines left out, and gives each
// line to emit until it returns false: a query stops reading once it has
// its lines. A cluster that fails to read is left out of a query that
// answers incomplete (unreadable); otherwise its error ends the read.
func (a *Aggregator) eachLine(ctx context.Context, srcs []source, emit func(string) bool) error {
	excl, err := a.queryExclusions(ctx)
	if err != nil {
		return err
	}
	point := viewOf(ctx).pointName()
	type head struct {
		source
		line string
	}
	var heads []*head
	failed := func(s source) error {
		if err := s.c.Err(); err != nil && (ctx.Err() != nil || !a.unreadable(ctx, s.name, err)) {
			return err
		}
		return nil
	}
	for _, s := range srcs {
		if l, ok := s.c.Next(); ok {
			heads = append(heads, &head{s, l})
		} else if err := failed(s); err != nil {
			return err
		}
	}
	batches := 0
	type candidate struct {
		line   string
		lo, hi int64
	}
	last, more, emitted := "", true, false
	for len(heads) > 0 && more {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A batch grows from one line (a limit=1 query reads one) to
		// maskBatch, checked against the masks at once.
		want := min(maskBatch, 1<<min(batches, 8))
		batches++
		var batch []candidate
		for len(heads) > 0 && len(batch) < want {
			best := 0
			for i, h := range heads {
				if h.line < heads[best].line {
					best = i
				}
			}
			h := heads[best]
			batch = append(batch, candidate{h.line, h.lo, h.hi})
			if next, ok := h.c.Next(); ok {
				h.line = next
			} else {
				if err := failed(h.source); err != nil {
					return err
				}
				heads = append(heads[:best], heads[best+1:]...)
			}
		}
		names := make([]string, len(batch))
		for i, c := range batch {
			names[i] = cdxindex.LineFile([]byte(c.line))
		}
		masks, err := a.masksOf(ctx, names)
		if err != nil {
			return err
		}
		for _, c := range batch {
			if slices.ContainsFunc(masks[cdxindex.LineFile([]byte(c.line))], func(b int64) bool { return c.lo <= b && b <= c.hi }) {
				continue // a withdrawn or re-indexed file's line
			}
			if c.line == last && emitted {
				continue // the same line in two clusters
			}
			last, emitted = c.line, true
			if excl.excluded(c.line, point) {
				continue
			}
			if more = emit(c.line); !more {
				break
			}
		}
	}
	return nil
}

// masksOf reads the masked builds of the named files (one statement for
// a batch of lines; none when no file is masked).
func (a *Aggregator) masksOf(ctx context.Context, names []string) (map[string][]int64, error) {
	rows, err := a.db.Query(ctx, `SELECT name, build FROM aggregator.masks WHERE name = ANY($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("read masks: %w", err)
	}
	defer rows.Close()
	var out map[string][]int64
	for rows.Next() {
		var n string
		var b int64
		if err := rows.Scan(&n, &b); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string][]int64{}
		}
		out[n] = append(out[n], b)
	}
	return out, rows.Err()
}

// Export writes the whole index as one sorted plain CDX file (a header
// line, then every line of every cluster merged, identical lines once,
// masked and excluded lines left out), streaming: for a small collection's
// tools that read plain CDX, or a copy elsewhere.
func (a *Aggregator) Export(ctx context.Context, w io.Writer) (int64, error) {
	clusters, err := a.liveClusters(ctx)
	if err != nil {
		return 0, err
	}
	all := cdxindex.Query{Prefix: true}
	var srcs []source
	for _, l := range clusters {
		if l.row.Lines > 0 {
			srcs = append(srcs, l.source(l.c.Cursor(all)))
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(cdxindex.Header + "\n")
	var n int64
	var werr error
	err = a.eachLine(ctx, srcs, func(line string) bool {
		bw.WriteString(line)
		werr = bw.WriteByte('\n')
		n++
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

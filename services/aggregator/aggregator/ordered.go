package aggregator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// The sorted answers (sort=closest, sort=reverse) read outward from where
// the answer begins instead of sorting the first lines of the index
// order: closest reads forward from the key and time and backward from
// them, reverse backward from the end. A URL with a million captures costs
// what its answer needs, and the capture replayed is the closest of all,
// not of the oldest ten thousand.

// readBackward reads the query's lines in [lo, hi) ("": the query's own
// bounds) from the end back, newest first, until want lines are kept (0:
// until lo) or read allows no more. It reads windows of the blocks of the
// cluster holding the most of the range, one block, then two, four...,
// each window every cluster's lines in its key range, merged as a forward
// query merges them.
func (a *Aggregator) readBackward(ctx context.Context, clusters []live, q cdxindex.Query, lo, hi string, want int, read *budget, keep func(string) bool) ([]string, error) {
	qlo, qhi := q.Within(lo, hi)
	// The cluster whose blocks mark the windows.
	c, first, end := widest(clusters, q, lo, hi)
	if c == nil {
		return nil, nil
	}
	blocks := c.Blocks()
	var out []string
	upper := qhi
	next := end // the window ends before block next's key (or at qhi)
	for span := 1; ; span *= 2 {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		lower := qlo
		if i := next - span; i > first && blocks[i].Key > qlo {
			lower = blocks[i].Key
			next = i
		}
		got, err := a.readRange(ctx, clusters, q, lower, upper, 0, read, keep)
		if err != nil {
			return out, err
		}
		if read != nil && read.Spent {
			// Cut by the read cap, the window's lines are its oldest, not
			// its newest: left out, the answer is what came before it,
			// the newest lines without a gap (and says it was cut).
			break
		}
		slices.Reverse(got)
		out = append(out, got...)
		if (want > 0 && len(out) >= want) || lower == qlo {
			break
		}
		upper = lower
	}
	if want > 0 && len(out) > want {
		out = out[:want]
	}
	return out, nil
}

// reverse answers sort=reverse: the query's last lines first, at most
// want (0: back to the first, or as far as read allows), reading the
// query's ranges from the end back.
func (a *Aggregator) reverse(ctx context.Context, r *request, want int, read *budget, keep func(string) bool) ([]string, error) {
	clusters, err := a.liveClusters(ctx)
	if err != nil {
		return nil, err
	}
	ranges := r.ranges()
	var out []string
	for i := len(ranges) - 1; i >= 0; i-- {
		got, err := a.readBackward(ctx, clusters, ranges[i], "", "", want-len(out), read, keep)
		if out = append(out, got...); err != nil {
			return out, err
		}
		if want > 0 && len(out) >= want || read.Spent {
			break
		}
	}
	return out, nil
}

// reverseCollapsed answers sort=reverse with a collapse: the lines the
// filters select, read backward up to the read cap, and of each run of
// lines whose collapse value is the same the oldest, as a collapse in
// index order keeps it (pywb's); newest first, at most want. A run cut by
// the cap is left out: its first line may lie before what was read.
func (a *Aggregator) reverseCollapsed(ctx context.Context, r *request, want int, read *budget) ([]string, error) {
	lines, err := a.reverse(ctx, r, 0, read, r.selects)
	if err != nil {
		return nil, err
	}
	var out []string
	next := ""
	if len(lines) > 0 {
		next = r.collapseValue(lines[0])
	}
	for i, line := range lines {
		v := next
		if i+1 < len(lines) {
			if next = r.collapseValue(lines[i+1]); next == v {
				continue // not the run's oldest
			}
		}
		if i+1 == len(lines) && read.Spent {
			break // the oldest run read may go on before the cap
		}
		if out = append(out, line); len(out) == want {
			// The answer is whole, however much more the cap left unread.
			read.Spent = false
			break
		}
	}
	return out, nil
}

// closest answers sort=closest (an exact URL): its captures by distance
// from the closest time, the earlier first on a tie, at most want: up to
// want read forward from the key and time, up to want backward from them,
// the two merged.
func (a *Aggregator) closest(ctx context.Context, r *request, want int, read *budget, keep func(string) bool) ([]string, error) {
	clusters, err := a.liveClusters(ctx)
	if err != nil {
		return nil, err
	}
	pivot := r.q.Key + " " + r.closest.Format("20060102150405")
	after, err := a.readRange(ctx, clusters, r.q, pivot, "", want, read, keep)
	if err != nil {
		return nil, err
	}
	before, err := a.readBackward(ctx, clusters, r.q, "", pivot, want, read, keep)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, min(want, len(before)+len(after)))
	for len(out) < want && (len(before) > 0 || len(after) > 0) {
		if len(after) == 0 || len(before) > 0 && r.distance(before[0]) <= r.distance(after[0]) {
			out, before = append(out, before[0]), before[1:]
		} else {
			out, after = append(out, after[0]), after[1:]
		}
	}
	return out, nil
}

// distance is how far a line's capture is from the closest time.
func (r *request) distance(line string) time.Duration {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 1<<63 - 1
	}
	d := timestampTime(f[1]).Sub(r.closest)
	if d < 0 {
		d = -d
	}
	return d
}

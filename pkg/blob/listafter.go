package blob

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"
)

// ListAfter returns up to limit objects under prefix whose keys sort after
// after (in byte order; "" starts at the beginning), in key order: one page
// of a listing resumed where the last page ended, so that a sweep of a
// large store holds a page at a time. Fewer than limit means the listing
// has reached its end.
func ListAfter(ctx context.Context, s Store, prefix, after string, limit int) ([]Info, error) {
	if limit <= 0 {
		return nil, nil
	}
	switch st := s.(type) {
	case *S3:
		return st.listAfter(ctx, prefix, after, limit)
	case *Local:
		return st.listAfter(ctx, prefix, after, limit)
	}
	var out []Info
	for info, err := range s.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		if info.Key > after {
			if out = append(out, info); len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// listAfter asks S3 to start after the key (StartAfter), a page at a time.
func (s *S3) listAfter(ctx context.Context, prefix, after string, limit int) ([]Info, error) {
	opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true, MaxKeys: min(limit, 1000)}
	if after != "" {
		opts.StartAfter = s.prefix + after
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing's goroutine when the page is full
	var out []Info
	for oi := range s.c.ListObjects(ctx, s.bucket, opts) {
		if oi.Err != nil {
			return nil, fmt.Errorf("list %q after %q: %w", prefix, after, s3Fault(oi.Err))
		}
		if out = append(out, s.info(oi)); len(out) == limit {
			break
		}
	}
	return out, nil
}

// listAfter walks the directories that can hold a key after after (a
// directory whose keys all sort before it is skipped whole) and keeps the
// limit smallest keys past it.
func (l *Local) listAfter(ctx context.Context, prefix, after string, limit int) ([]Info, error) {
	if err := l.Check(ctx); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	smallest := &maxHeap{}
	err := l.walkKeys(ctx, prefix, func(dir string) bool {
		// Every key in it (dir + ...) sorts before after, or after the
		// limit-th kept.
		return dir < after && !strings.HasPrefix(after, dir) ||
			smallest.Len() == limit && dir > (*smallest)[0] && !strings.HasPrefix((*smallest)[0], dir)
	}, func(key string) {
		switch {
		case key <= after:
		case smallest.Len() < limit:
			heap.Push(smallest, key)
		case key < (*smallest)[0]:
			(*smallest)[0] = key
			heap.Fix(smallest, 0)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list %q after %q: %w", prefix, after, err)
	}
	keys := make([]string, smallest.Len())
	for i := len(keys) - 1; i >= 0; i-- {
		keys[i] = heap.Pop(smallest).(string)
	}
	out := make([]Info, 0, len(keys))
	for _, k := range keys {
		info, err := l.Stat(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// maxHeap keeps the largest of the smallest keys on top.
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

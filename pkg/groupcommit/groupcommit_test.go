package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/groupcommit"
)

type item struct {
	key string
	n   int
}

// recorder is a write function that records the groups it was given and
// fails any group holding a "bad" item.
type recorder struct {
	mu      sync.Mutex
	groups  [][]item
	release chan struct{} // the first write waits on it
	once    sync.Once
	started chan struct{}
}

func (r *recorder) write(_ context.Context, items []item) error {
	r.once.Do(func() {
		close(r.started)
		<-r.release
	})
	r.mu.Lock()
	r.groups = append(r.groups, slices.Clone(items))
	r.mu.Unlock()
	for _, it := range items {
		if it.key == "bad" {
			return errors.New("bad item")
		}
	}
	return nil
}

func newRecorder() *recorder {
	return &recorder{release: make(chan struct{}), started: make(chan struct{})}
}

// queueBehind starts the first item, which blocks in its write, then the
// others, and waits until they are all queued behind it.
func queueBehind(t *testing.T, c *groupcommit.Committer[item], r *recorder, first item, rest []item) []error {
	t.Helper()
	errs := make([]error, len(rest)+1)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = c.Do(context.Background(), first) })
	<-r.started
	for i, it := range rest {
		wg.Go(func() { errs[i+1] = c.Do(context.Background(), it) })
	}
	for c.Queued() < len(rest) {
		// Queued is the condition: every item is waiting behind the first.
		waitABit()
	}
	close(r.release)
	wg.Wait()
	return errs
}

func TestItemsQueuedBehindAGroupAreWrittenInTheNextOne(t *testing.T) {
	r := newRecorder()
	c := groupcommit.New(r.write)
	var rest []item
	for i := range 50 {
		rest = append(rest, item{key: fmt.Sprint(i), n: i})
	}
	for i, err := range queueBehind(t, c, r, item{key: "first"}, rest) {
		if err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	if len(r.groups) != 2 || len(r.groups[0]) != 1 || len(r.groups[1]) != 50 {
		t.Fatalf("groups of %v, want the first alone and the 50 queued behind it in one", sizes(r.groups))
	}
}

func TestAGroupIsAtMostMaxGroup(t *testing.T) {
	r := newRecorder()
	c := groupcommit.New(r.write, groupcommit.MaxGroup[item](20))
	var rest []item
	for i := range 50 {
		rest = append(rest, item{key: fmt.Sprint(i)})
	}
	queueBehind(t, c, r, item{key: "first"}, rest)
	if got := sizes(r.groups); !slices.Equal(got, []int{1, 20, 20, 10}) {
		t.Fatalf("groups of %v, want 1, 20, 20, 10", got)
	}
}

func TestItemsSharingAKeyAreInDifferentGroupsInOrder(t *testing.T) {
	r := newRecorder()
	c := groupcommit.New(r.write, groupcommit.Keys(func(it item) []string { return []string{it.key} }))
	rest := []item{{key: "a", n: 1}, {key: "b", n: 1}, {key: "a", n: 2}, {key: "c", n: 1}, {key: "a", n: 3}, {key: "b", n: 2}}
	// Queue them in this order: one at a time, each queued before the next.
	errs := make([]error, len(rest))
	var wg sync.WaitGroup
	wg.Go(func() { c.Do(context.Background(), item{key: "first"}) })
	<-r.started
	for i, it := range rest {
		wg.Go(func() { errs[i] = c.Do(context.Background(), it) })
		for c.Queued() < i+1 {
			waitABit()
		}
	}
	close(r.release)
	wg.Wait()
	var order []string
	for gi, g := range r.groups {
		seen := map[string]bool{}
		for _, it := range g {
			if seen[it.key] {
				t.Errorf("group %d holds key %s twice: %v", gi, it.key, g)
			}
			seen[it.key] = true
			if it.key == "a" {
				order = append(order, fmt.Sprint(it.n))
			}
		}
	}
	if !slices.Equal(order, []string{"1", "2", "3"}) {
		t.Errorf("a's items written in the order %v, want 1 2 3", order)
	}
}

func TestAFailedGroupIsWrittenAgainOneItemAtATime(t *testing.T) {
	r := newRecorder()
	var observed []string
	var mu sync.Mutex
	c := groupcommit.New(r.write, groupcommit.Observe[item](func(size int, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, fmt.Sprintf("%d %v", size, err != nil))
	}))
	rest := []item{{key: "x"}, {key: "bad"}, {key: "y"}}
	errs := queueBehind(t, c, r, item{key: "first"}, rest)
	for i, err := range errs {
		if (err != nil) != (i == 2) {
			t.Errorf("item %d (%s): err %v; only the bad item fails", i, append([]item{{key: "first"}}, rest...)[i].key, err)
		}
	}
	if got := sizes(r.groups); !slices.Equal(got, []int{1, 3, 1, 1, 1}) {
		t.Fatalf("groups of %v, want the first, the three together, then each alone", got)
	}
	if want := []string{"1 false", "3 true"}; !slices.Equal(observed, want) {
		t.Errorf("observed groups %v, want %v (the retries item by item are not groups)", observed, want)
	}
}

func sizes(groups [][]item) []int {
	var out []int
	for _, g := range groups {
		out = append(out, len(g))
	}
	return out
}

// waitABit lets the other goroutines run while a test waits for a
// condition.
func waitABit() { runtime.Gosched() }

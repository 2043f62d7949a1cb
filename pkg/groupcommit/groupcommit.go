// Package groupcommit writes work handed to it concurrently in groups: the
// first caller to arrive while no group is being written writes its own
// item and every one queued meanwhile, in one call of the write function
// (one transaction, say), then hands on; the others wait for their
// outcome. Under load the groups grow by themselves (every item that
// arrived while a group was written is in the next one); alone, an item
// is written at once, with no timer to wait for.
//
// A group that fails is written again one item at a time, so one item's
// fault is its own. Items may name keys: two items sharing a key are never
// in one group (the later waits for the next), so a group's write may
// treat its items as distinct.
//
// The auditor's integrity checks record their effects this way, and the
// curator's matcher and merger match and merge in groups.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// WriteFunc writes a group of items; an error fails the whole group.
type WriteFunc[T any] func(ctx context.Context, items []T) error

// Committer writes items of type T in groups through a WriteFunc.
type Committer[T any] struct {
	write   WriteFunc[T]
	max     int
	keys    func(T) []string
	observe func(size int, took time.Duration, err error)

	mu      sync.Mutex
	queue   []*pending[T]
	writing bool
}

type pending[T any] struct {
	item T
	err  error
	done chan struct{}
}

// Option configures a Committer.
type Option[T any] func(*Committer[T])

// MaxGroup bounds how many items one group holds (default 256).
func MaxGroup[T any](n int) Option[T] {
	return func(c *Committer[T]) { c.max = max(n, 1) }
}

// Keys names each item's keys: items sharing one are written in
// different groups, in the order they came.
func Keys[T any](keys func(T) []string) Option[T] {
	return func(c *Committer[T]) { c.keys = keys }
}

// Observe has fn called after each group is written with its size, how
// long the write took and its error (a group that failed is then written
// item by item): what metrics of the groups are made of.
func Observe[T any](fn func(size int, took time.Duration, err error)) Option[T] {
	return func(c *Committer[T]) { c.observe = fn }
}

// New returns a Committer writing through write.
func New[T any](write WriteFunc[T], opts ...Option[T]) *Committer[T] {
	c := &Committer[T]{write: write, max: 256}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Do writes item, in a group with others, and returns when it is written:
// nil, or the error of writing it alone. The group is written whatever
// happens to ctx meanwhile (an item written is not written again on a
// retry its caller's cancellation would cause); ctx's values reach the
// write.
func (c *Committer[T]) Do(ctx context.Context, item T) error {
	p := &pending[T]{item: item, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if !c.writing {
		c.writing = true
		c.mu.Unlock()
		c.drain(context.WithoutCancel(ctx))
	} else {
		c.mu.Unlock()
	}
	<-p.done
	return p.err
}

// drain writes the queue a group at a time until it is empty; after the
// first group it hands on to a goroutine, so no caller waits on others'
// groups beyond the one it was in.
func (c *Committer[T]) drain(ctx context.Context) {
	for first := true; ; first = false {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		if !first {
			c.mu.Unlock()
			go c.drain(ctx)
			return
		}
		group := c.take()
		c.mu.Unlock()
		c.writeGroup(ctx, group)
	}
}

// take removes the next group from the queue: up to max items in order,
// leaving for later those sharing a key with one taken. c.mu is held.
func (c *Committer[T]) take() []*pending[T] {
	if c.keys == nil {
		n := min(len(c.queue), c.max)
		group := c.queue[:n:n]
		c.queue = append([]*pending[T](nil), c.queue[n:]...)
		return group
	}
	var group, rest []*pending[T]
	taken := map[string]bool{}
	for _, p := range c.queue {
		keys := c.keys(p.item)
		clash := len(group) == c.max
		for _, k := range keys {
			clash = clash || taken[k]
		}
		if clash {
			rest = append(rest, p)
			// A later item of the same key must not overtake this one.
			for _, k := range keys {
				taken[k] = true
			}
			continue
		}
		for _, k := range keys {
			taken[k] = true
		}
		group = append(group, p)
	}
	c.queue = rest
	return group
}

// writeGroup writes the group, or, when that fails, each item alone.
func (c *Committer[T]) writeGroup(ctx context.Context, group []*pending[T]) {
	defer func() {
		for _, p := range group {
			close(p.done)
		}
	}()
	items := make([]T, len(group))
	for i, p := range group {
		items[i] = p.item
	}
	start := time.Now()
	err := c.write(ctx, items)
	if c.observe != nil {
		c.observe(len(items), time.Since(start), err)
	}
	if err == nil || len(group) == 1 {
		for _, p := range group {
			p.err = err
		}
		return
	}
	for i, p := range group {
		p.err = c.write(ctx, items[i:i+1])
	}
}

// Queued is how many items wait for a group (not counting the group being
// written).
func (c *Committer[T]) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

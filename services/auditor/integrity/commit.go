package integrity

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// maxGroup bounds the checks one transaction records.
const maxGroup = 256

// committer records the effects of concurrent checks in one transaction
// and one round trip (group commit): the first check to arrive while none
// is being written writes its own and every one queued meanwhile, then
// hands on; the others wait for their outcome. A check no longer pays a
// transaction of its own (BEGIN, an INSERT, an UPDATE, COMMIT: four round
// trips), which was most of a small object's check. A group that fails is
// written again one check at a time, so one check's fault is its own.
type committer struct {
	mu      sync.Mutex
	queue   []*pendingCheck
	writing bool
}

type pendingCheck struct {
	res     Result
	attempt int
	err     error
	done    chan struct{}
}

// commit records res (a check's effects) and returns when it is written.
func (g *committer) commit(ctx context.Context, c *Checker, res Result, attempt int) error {
	p := &pendingCheck{res: res, attempt: attempt, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if !g.writing {
		g.writing = true
		g.mu.Unlock()
		g.write(context.WithoutCancel(ctx), c)
	} else {
		g.mu.Unlock()
	}
	// The group is written whatever happens to this task's context: a
	// check recorded is not recorded again on a redelivery it caused.
	<-p.done
	return p.err
}

// write writes the queue a group at a time until it is empty; after the
// first group it hands on to a goroutine, so no check waits on others'
// groups beyond the one it was in.
func (g *committer) write(ctx context.Context, c *Checker) {
	for first := true; ; first = false {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.writing = false
			g.mu.Unlock()
			return
		}
		if !first {
			g.mu.Unlock()
			go g.write(ctx, c)
			return
		}
		n := min(len(g.queue), maxGroup)
		group := g.queue[:n:n]
		g.queue = append([]*pendingCheck(nil), g.queue[n:]...)
		g.mu.Unlock()
		c.writeGroup(ctx, group)
	}
}

// writeGroup writes the group's effects in one transaction, or, when that
// fails, each check's in its own.
func (c *Checker) writeGroup(ctx context.Context, group []*pendingCheck) {
	defer func() {
		for _, p := range group {
			close(p.done)
		}
	}()
	err := c.writeChecks(ctx, group)
	if err == nil || len(group) == 1 {
		for _, p := range group {
			p.err = err
		}
		return
	}
	for _, p := range group {
		p.err = c.writeChecks(ctx, []*pendingCheck{p})
	}
}

// writeChecks runs the checks' statements in one transaction, one round
// trip.
func (c *Checker) writeChecks(ctx context.Context, group []*pendingCheck) error {
	return pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, p := range group {
			if err := c.apply(ctx, b, p.res, p.attempt); err != nil {
				return err
			}
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			if len(group) == 1 {
				return fmt.Errorf("record the check of %s: %w", group[0].res.Observation.Object, err)
			}
			return fmt.Errorf("record %d checks: %w", len(group), err)
		}
		return nil
	})
}

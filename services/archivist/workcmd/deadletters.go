package workcmd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/work"
)

// Dead letters are the bus's work: messages a consumer gave up on, each an
// item bus/dead-letter/SEQ in state "dead", which an operator replays once
// the cause is fixed or deletes. They are messages of the DEADLETTER
// stream, not rows of a service's table, so the CLI reaches them with its
// own NATS credentials (the operator's) rather than through a service's
// work routes; a replay carries its actor on the message it sends again
// (Archivist-Replayed-By).
const (
	BusPipeline    = "bus"
	DeadLetterKind = "dead-letter"
	deadState      = "dead"
)

// DeadLetters finds and moves dead letters with the work model's filter
// and verbs (replay, delete).
type DeadLetters struct {
	Bus *bus.Bus
	// Log takes each action: who, the verb, the filter, the count.
	Log *slog.Logger
	// Now is the clock an age is measured on (time.Now when nil).
	Now func() time.Time
}

// deadLetterVerbs are the verbs a dead letter takes.
var deadLetterVerbs = []work.Verb{work.Replay, work.Delete}

// ForDeadLetters reports whether f asks for dead letters: it names the bus
// pipeline or the dead-letter kind, or (replay) no pipeline at all.
func ForDeadLetters(v work.Verb, f work.Filter) bool {
	return f.Pipeline == BusPipeline || f.Kind == DeadLetterKind || v == work.Replay && f.Pipeline == ""
}

// Item is d as a work item.
func Item(d bus.DeadLetter) work.Item {
	keys := []string{fmt.Sprintf("%s/%s#%d", d.Stream, d.Consumer, d.OriginalSeq), d.Consumer, d.Subject}
	for _, k := range []string{d.ID, d.Type, d.Producer, d.TraceID} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	return work.Item{Pipeline: BusPipeline, Kind: DeadLetterKind, ID: strconv.FormatUint(d.Seq, 10), State: deadState,
		Attempts: int(d.Deliveries), Reason: d.Reason, MovedAt: d.At, CreatedAt: d.At, Keys: keys, Verbs: deadLetterVerbs}
}

// matches reports whether f admits it, as a service's source would: every
// field set must match; a query is an id or key exactly, or every word of
// it in the reason.
func matches(f work.Filter, it work.Item, now time.Time) bool {
	switch {
	case f.Pipeline != "" && f.Pipeline != it.Pipeline, f.Kind != "" && f.Kind != it.Kind, f.ID != "" && f.ID != it.ID,
		len(f.States) > 0 && !slices.Contains(f.States, it.State),
		f.Collection != "", f.Submitter != "", // a dead letter has neither
		f.OlderThan > 0 && now.Sub(it.MovedAt) < f.OlderThan:
		return false
	case f.Query == "":
		return true
	case f.Query == it.ID || slices.Contains(it.Keys, f.Query):
		return true
	}
	reason := strings.ToLower(it.Reason)
	for _, w := range strings.Fields(strings.ToLower(f.Query)) {
		if !strings.Contains(reason, w) {
			return false
		}
	}
	return true
}

// scan hands fn each dead letter f matches with a sequence below below
// (0: every one), oldest first, reading the stream a page at a time: what
// it holds is fn's. The stream is bounded per consumer
// (events.MaxCurationPerSubject) and by age, so a scan costs what has gone
// wrong, not the archive's size.
func (dl *DeadLetters) scan(ctx context.Context, f work.Filter, below uint64, fn func(work.Item)) error {
	if err := f.Validate(); err != nil {
		return err
	}
	now := time.Now()
	if dl.Now != nil {
		now = dl.Now()
	}
	for from := uint64(0); ; {
		page, err := dl.Bus.DeadLetters(ctx, from, 500)
		if err != nil || len(page) == 0 {
			return err
		}
		for _, d := range page {
			if below > 0 && d.Seq >= below {
				return nil
			}
			from = d.Seq + 1
			if it := Item(d); matches(f, it, now) {
				fn(it)
			}
		}
	}
}

// newest keeps the last n items it is given (a ring), newest first when
// read: memory is n items whatever the scan's length.
type newest struct {
	n     int
	items []work.Item
	next  int // where the next item goes once the ring is full
}

func (k *newest) add(it work.Item) {
	if len(k.items) < k.n {
		k.items = append(k.items, it)
		return
	}
	k.items[k.next] = it
	k.next = (k.next + 1) % k.n
}

func (k *newest) list() []work.Item {
	out := append(slices.Clone(k.items[k.next:]), k.items[:k.next]...) // oldest first
	slices.Reverse(out)
	return out
}

// Find is a page of the dead letters f matches, newest first, after the
// cursor after (a dead letter's sequence, as the previous page's Next).
func (dl *DeadLetters) Find(ctx context.Context, f work.Filter, after string, limit int) (work.Page, error) {
	if limit <= 0 {
		limit = 50
	}
	var below uint64
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return work.Page{}, &work.InvalidError{Field: "after", Msg: fmt.Sprintf("%q is not a dead letter's cursor", after)}
		}
		below = n
	}
	keep := &newest{n: limit + 1}
	if err := dl.scan(ctx, f, below, keep.add); err != nil {
		return work.Page{}, err
	}
	p := work.Page{Items: keep.list()}
	if len(p.Items) > limit {
		p.Items, p.Next = p.Items[:limit], p.Items[limit-1].ID
	}
	return p, nil
}

// DryRun counts the dead letters v would move.
func (dl *DeadLetters) DryRun(ctx context.Context, v work.Verb, f work.Filter) (work.Count, error) {
	if !slices.Contains(deadLetterVerbs, v) {
		return work.Count{}, &work.NoVerbError{Verb: v, Takes: []string{BusPipeline + "/" + DeadLetterKind}}
	}
	c := work.Count{Verb: v, Filter: f, ByKind: map[string]int{}, Sample: []string{}}
	sample := &newest{n: 20}
	if err := dl.scan(ctx, f, 0, func(it work.Item) { c.N++; sample.add(it) }); err != nil {
		return work.Count{}, err
	}
	if c.N > 0 {
		c.ByKind[BusPipeline+"/"+DeadLetterKind] = c.N
	}
	for _, it := range sample.list() {
		c.Sample = append(c.Sample, it.Ref())
	}
	return c, nil
}

// Act moves by v every dead letter f matches, if that is still confirm of
// them, oldest first; actor is who acts. It stops at the first that cannot
// be moved (a replay refused as forged, say), with what it moved so far.
// One scan counts them and keeps their sequences (at most work.MaxAction).
func (dl *DeadLetters) Act(ctx context.Context, v work.Verb, f work.Filter, confirm int, actor string) (work.Action, error) {
	if !slices.Contains(deadLetterVerbs, v) {
		return work.Action{}, &work.NoVerbError{Verb: v, Takes: []string{BusPipeline + "/" + DeadLetterKind}}
	}
	var items []work.Item // oldest first, as they failed
	n := 0
	if err := dl.scan(ctx, f, 0, func(it work.Item) {
		if n++; n <= work.MaxAction {
			items = append(items, it)
		}
	}); err != nil {
		return work.Action{}, err
	}
	if n > work.MaxAction {
		return work.Action{}, &work.TooManyError{N: n}
	}
	a := work.Action{At: time.Now().UTC(), Actor: actor, Verb: v, Filter: f, Counted: n, Items: []string{}, Service: BusPipeline}
	if n != confirm {
		a.Outcome = (&work.MovedError{Confirmed: confirm, Now: n}).Error()
		dl.log(ctx, a)
		return a, &work.MovedError{Confirmed: confirm, Now: n}
	}
	var err error
	for _, it := range items {
		seq, _ := strconv.ParseUint(it.ID, 10, 64)
		if v == work.Replay {
			_, err = dl.Bus.Replay(ctx, seq, actor)
		} else {
			_, err = dl.Bus.DeleteDeadLetter(ctx, seq)
		}
		if err != nil {
			break
		}
		a.Moved++
		a.Items = append(a.Items, it.Ref())
	}
	a.Outcome = "ok"
	if err != nil {
		a.Outcome = err.Error()
	}
	dl.log(ctx, a)
	return a, err
}

func (dl *DeadLetters) log(ctx context.Context, a work.Action) {
	if dl.Log == nil {
		return
	}
	level := slog.LevelInfo
	if a.Outcome != "ok" {
		level = slog.LevelWarn
	}
	dl.Log.Log(ctx, level, "work: dead letters acted on", "actor", a.Actor, "verb", a.Verb, "filter", a.Filter.Values().Encode(),
		"counted", a.Counted, "moved", a.Moved, "outcome", a.Outcome, "items", a.Items)
}

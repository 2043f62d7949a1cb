package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/fault"
)

// Paused reports whether the subscription is paused for a dependency that
// is down (a caller fetching by hand should wait).
func (s *Subscription) Paused() bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return s.paused
}

// outage reports whether a handler's error came with a dependency down,
// and if so pauses the subscription.
func (s *Subscription) outage(err error) bool {
	if s.b.depCheck == nil || errors.Is(err, fault.ErrPermanent) || IsRetryAfter(err) || s.hctx.Err() != nil {
		return false
	}
	var de decodeError
	if errors.As(err, &de) {
		return false
	}
	cctx, cancel := context.WithTimeout(s.hctx, 5*time.Second)
	derr := s.b.depCheck(cctx)
	cancel()
	if derr == nil {
		return false
	}
	return s.pause(derr)
}

// pauseProbe is how often a paused subscription checks its dependencies.
var pauseProbe = time.Second

// pause stops taking messages until the dependency check passes; false
// when the subscription is stopping (its messages are given back instead).
func (s *Subscription) pause(cause error) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.stopping {
		return false
	}
	if s.paused {
		return true
	}
	s.paused, s.resumed = true, make(chan struct{})
	close(s.pausing)
	if s.cc != nil {
		// Drain, not Stop: the messages the client has already pulled are
		// handed over (and held, kept in progress) instead of lying
		// unseen in its buffer until their ack wait runs out.
		s.cc.Drain()
		s.drained = append(s.drained, s.cc)
		s.cc = nil
	}
	s.paused0.Inc()
	s.log.Warn("consumer paused: a dependency is down; messages in hand wait", "cause", cause)
	go func() {
		t := time.NewTicker(pauseProbe)
		defer t.Stop()
		for {
			select {
			case <-s.hctx.Done():
				return
			case <-t.C:
			}
			cctx, cancel := context.WithTimeout(s.hctx, 5*time.Second)
			err := s.b.depCheck(cctx)
			cancel()
			if err == nil && s.resume() {
				return
			}
		}
	}()
	return true
}

// resume ends a pause; false if consuming could not restart yet.
func (s *Subscription) resume() bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if !s.paused {
		return true
	}
	if !s.stopping && s.callback != nil && !s.opts.manual && !s.opts.oneAtATime {
		cc, err := s.consume()
		if err != nil {
			s.log.Warn("resume consuming", "err", err)
			return false
		}
		s.cc = cc
	}
	s.paused = false
	close(s.resumed)
	s.pausing = make(chan struct{})
	if held := s.held; len(held) > 0 {
		s.held = nil
		s.feeding.Add(1)
		go func() {
			defer s.feeding.Done()
			for _, q := range held {
				s.work <- q
			}
		}()
	}
	s.log.Info("consumer resumed: its dependencies answer again")
	return true
}

// waitResume waits for a pause to end; false if ctx ended first.
func (s *Subscription) waitResume(ctx context.Context) bool {
	s.pmu.Lock()
	paused, ch := s.paused, s.resumed
	s.pmu.Unlock()
	if !paused {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// Stop stops taking new messages, lets the handlers finish the messages they
// hold (acking or nakking each), and returns. If ctx ends first, the
// handlers' context is cancelled; whatever they leave unacked is redelivered
// after the ack wait, so nothing is lost either way.
func (s *Subscription) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.pmu.Lock()
		s.stopping = true
		cc := s.cc
		if s.paused { // the messages waiting for a dependency are given back
			s.paused = false
			close(s.resumed)
			s.pausing = make(chan struct{})
		}
		held, drained := s.held, s.drained
		s.held, s.drained = nil, nil
		s.pmu.Unlock()
		for _, d := range drained {
			select {
			case <-d.Closed():
			case <-ctx.Done():
				d.Stop()
			}
		}
		for _, q := range held {
			s.inflight.remove(q.e)
			q.e.cancel()
			_ = q.msg.Nak()
		}
		if cc != nil {
			cc.Drain()
			select {
			case <-cc.Closed():
			case <-ctx.Done():
				cc.Stop()
				s.stopErr = fmt.Errorf("stop consumer %s: %w", s.name, ctx.Err())
			}
		}
		if s.fetchStop != nil {
			s.fetchStop()
			select {
			case <-s.fetchDone:
			case <-ctx.Done():
				s.hcancel()
				<-s.fetchDone
				s.stopErr = fmt.Errorf("stop consumer %s: handler cancelled: %w", s.name, ctx.Err())
			}
		}
		done := make(chan struct{})
		go func() {
			s.feeding.Wait()
			if s.work != nil {
				close(s.work)
			}
			s.workers.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.hcancel()
			<-done
			if s.stopErr == nil {
				s.stopErr = fmt.Errorf("stop consumer %s: handlers cancelled: %w", s.name, ctx.Err())
			}
		}
		s.hcancel()
		<-s.hbDone
	})
	return s.stopErr
}

// startFetchLoop fetches one message, settles it, and fetches the next.
// Stopping ends the wait for a message at once and lets the one in hand
// finish.
func (s *Subscription) startFetchLoop(cons jetstream.Consumer) {
	fctx, cancel := context.WithCancel(context.Background())
	s.fetchStop, s.fetchDone = cancel, make(chan struct{})
	go func() {
		defer close(s.fetchDone)
		for fctx.Err() == nil {
			if !s.waitResume(fctx) {
				return
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				if fctx.Err() == nil {
					s.log.Warn("fetch failed", "err", err)
					select {
					case <-fctx.Done():
					case <-time.After(time.Second):
					}
				}
				continue
			}
			for msg := range batch.Messages() {
				s.process(msg)
			}
		}
	}()
}

// Consumer is the JetStream consumer behind the subscription.
func (s *Subscription) Consumer() jetstream.Consumer { return s.cons }

// Process handles one message fetched by the caller (WithManualFetch).
func (s *Subscription) Process(msg jetstream.Msg) { s.process(msg) }

// queued is a message handed to the workers, already in flight.
type queued struct {
	msg jetstream.Msg
	e   *inflightEntry
}

// track puts msg in flight: kept in progress by the heartbeat, its
// handler's context ended at the handler timeout.
func (s *Subscription) track(msg jetstream.Msg) *inflightEntry {
	now := time.Now()
	ctx, cancel := context.WithCancel(s.hctx)
	e := s.inflight.add(msg, now, now.Add(s.opts.timeout), cancel)
	if s.opts.stall {
		e.stall = s.opts.timeout
	}
	e.ctx = context.WithValue(ctx, progressKey{}, e)
	return e
}

func (s *Subscription) process(msg jetstream.Msg) { s.handleQueued(msg, s.track(msg)) }

func (s *Subscription) handleQueued(msg jetstream.Msg, e *inflightEntry) {
	start := time.Now()
	ctx, cancel := e.ctx, e.cancel
	err := s.safeHandle(ctx, msg)
	// A failure while a dependency is down: the message waits, kept in
	// progress, until the pause ends, then is handled again, spending no
	// delivery (up to the handler timeout, which ends ctx).
	for err != nil && s.outage(err) && s.waitResume(ctx) {
		err = s.safeHandle(ctx, msg)
	}
	s.inflight.remove(e)
	cancel()
	s.handleTime.Observe(time.Since(start).Seconds())
	if err == nil {
		if aerr := msg.Ack(); aerr != nil {
			s.log.WarnContext(ctx, "ack failed; the message will be redelivered", "err", aerr, "subject", msg.Subject())
		}
		s.acked.Inc()
		return
	}
	meta, merr := msg.Metadata()
	var delivered, seq uint64 = 1, 0
	if merr == nil {
		delivered, seq = meta.NumDelivered, meta.Sequence.Stream
	}
	var ra retryAfter
	if errors.As(err, &ra) {
		if nerr := msg.NakWithDelay(ra.d); nerr != nil {
			s.log.WarnContext(ctx, "nak failed; the message will be redelivered after the ack wait", "err", nerr)
		}
		s.retried.Inc()
		return
	}
	var de decodeError
	lastDelivery := s.maxDeliver > 0 && delivered >= uint64(s.maxDeliver)
	if errors.As(err, &de) || errors.Is(err, fault.ErrPermanent) || lastDelivery {
		reason := err.Error()
		if lastDelivery && !errors.As(err, &de) && !errors.Is(err, fault.ErrPermanent) {
			// The dead letter names the error that spent the last delivery,
			// not only that the deliveries ran out.
			reason = fmt.Sprintf("gave up after %d deliveries: %v", delivered, err)
		}
		if dlErr := s.b.deadLetter(s.hctx, s.stream, s.name, seq, msg.Subject(), msg.Headers(), msg.Data(), delivered, reason); dlErr != nil {
			s.log.ErrorContext(ctx, "dead-letter failed; will retry", "err", dlErr, "seq", seq, "reason", reason)
			_ = msg.NakWithDelay(s.retryDelay(delivered))
			s.retried.Inc()
			return
		}
		_ = msg.TermWithReason(truncate(reason, 256))
		s.log.WarnContext(ctx, "message dead-lettered", "seq", seq, "subject", msg.Subject(), "id", msg.Headers().Get(events.HeaderMsgID), "reason", reason)
		s.deadLettered.Inc()
		s.reject(msg, seq, reason)
		return
	}
	delay := s.retryDelay(delivered)
	s.log.WarnContext(ctx, "handler failed; will redeliver", "err", err, "seq", seq, "subject", msg.Subject(),
		"id", msg.Headers().Get(events.HeaderMsgID), "delivery", delivered, "delay", delay)
	if nerr := msg.NakWithDelay(delay); nerr != nil {
		s.log.WarnContext(ctx, "nak failed; the message will be redelivered after the ack wait", "err", nerr)
	}
	s.retried.Inc()
}

// reject publishes the rejection of a dead-lettered message to its
// publisher (WithRejections).
func (s *Subscription) reject(msg jetstream.Msg, seq uint64, reason string) {
	if s.opts.rejections == nil {
		return
	}
	to, ok := s.opts.rejections(msg.Subject())
	if !ok {
		return
	}
	env, err := events.New(s.b.producer, &events.Rejected{EventID: msg.Headers().Get(events.HeaderMsgID),
		Subject: msg.Subject(), Sequence: seq, Reason: reason})
	if err != nil {
		s.log.Error("rejection not made", "err", err, "seq", seq)
		return
	}
	// One rejection per stream message, however often it is dead-lettered.
	env.ID = fmt.Sprintf("rejected:%s:%d", s.stream, seq)
	if _, err := s.b.Publish(s.hctx, to, env); err != nil {
		s.log.Error("rejection not published (the dead letter holds the message)", "err", err, "seq", seq, "subject", to)
	}
}

// safeHandle runs the handler (whose context the heartbeat ends at the
// handler timeout) and turns a panic into a
// permanent error with the panic's value, so that a message that crashes its
// handler is dead-lettered with the reason instead of killing the process
// on every redelivery.
func (s *Subscription) safeHandle(ctx context.Context, msg jetstream.Msg) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.ErrorContext(ctx, "handler panicked", "panic", r, "subject", msg.Subject(),
				"id", msg.Headers().Get(events.HeaderMsgID), "stack", string(debug.Stack()))
			err = fault.Permanent(fmt.Errorf("handler panicked: %v", r))
		}
	}()
	return s.handle(ctx, msg)
}

// retryDelay is base·2^(delivered-1), at most retryMax.
func (s *Subscription) retryDelay(delivered uint64) time.Duration {
	d := s.opts.retryBase
	for i := uint64(1); i < delivered && d < s.opts.retryMax; i++ {
		d *= 2
	}
	return min(d, s.opts.retryMax)
}

// heartbeat tells JetStream that messages held longer than 0.4 of the ack
// wait are still being worked on, so that a slow handler's message is not
// redelivered to someone else.
func (s *Subscription) heartbeat() {
	defer close(s.hbDone)
	every := min(s.ackWait/5, max(s.opts.timeout/4, 10*time.Millisecond))
	due := s.ackWait * 2 / 5
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.hctx.Done():
			return
		case now := <-t.C:
			s.inflight.each(func(e *inflightEntry) {
				if now.UnixNano() >= e.until.Load() {
					e.cancel() // past the handler (or stall) timeout: its context ends
					return
				}
				if now.Sub(e.last) >= due {
					if err := e.msg.InProgress(); err != nil {
						s.log.Warn("in-progress failed", "err", err, "subject", e.msg.Subject())
					}
					e.last = now
				}
			})
		}
	}
}

type inflightEntry struct {
	msg    jetstream.Msg
	last   time.Time
	until  atomic.Int64       // unix ns: kept in progress until then (the handler timeout, or the stall timeout after the last Progress)
	stall  time.Duration      // the stall timeout (0: until is fixed)
	ctx    context.Context    // the handler's
	cancel context.CancelFunc // ends the handler's context
}

type inflight struct {
	mu sync.Mutex
	m  map[*inflightEntry]struct{}
}

func (f *inflight) add(msg jetstream.Msg, now, until time.Time, cancel context.CancelFunc) *inflightEntry {
	e := &inflightEntry{msg: msg, last: now, cancel: cancel}
	e.until.Store(until.UnixNano())
	f.mu.Lock()
	f.m[e] = struct{}{}
	f.mu.Unlock()
	return e
}

func (f *inflight) remove(e *inflightEntry) {
	f.mu.Lock()
	delete(f.m, e)
	f.mu.Unlock()
}

func (f *inflight) each(fn func(*inflightEntry)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for e := range f.m {
		fn(e)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

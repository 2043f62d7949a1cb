package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/telemetry"
)

// DeadLetter is a message in the dead-letter stream.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream.
	Seq uint64 `json:"seq"`
	// Stream, Consumer and Subject say where it came from.
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	Subject  string `json:"subject"`
	// OriginalSeq is its sequence in the original stream.
	OriginalSeq uint64 `json:"original_seq"`
	// Deliveries is how often it was delivered before it was given up on.
	Deliveries uint64 `json:"deliveries"`
	// Reason says why.
	Reason string `json:"reason"`
	// Type and ID are the event's, when it had them, and Producer the
	// service or publisher that sent it (what its envelope's header says:
	// an operator weighs a replay by it).
	Type     string `json:"type,omitempty"`
	ID       string `json:"id,omitempty"`
	Producer string `json:"producer,omitempty"`
	// At is when it was dead-lettered.
	At time.Time `json:"at"`
	// Size is the payload's size in bytes.
	Size int `json:"size"`
	// TraceID is the W3C trace id the message carried, if any.
	TraceID string `json:"trace_id,omitempty"`
}

// DeadLetters lists up to limit dead letters, oldest first, starting at
// sequence from (0: the first).
func (b *Bus) DeadLetters(ctx context.Context, from uint64, limit int) ([]DeadLetter, error) {
	st, err := b.js.Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	var out []DeadLetter
	if info.State.Msgs == 0 {
		return out, nil
	}
	for seq := max(from, info.State.FirstSeq, 1); seq <= info.State.LastSeq && len(out) < limit; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // replayed or deleted
		}
		if err != nil {
			return nil, fmt.Errorf("dead letter %d: %w", seq, err)
		}
		out = append(out, deadLetterOf(m))
	}
	return out, nil
}

func deadLetterOf(m *jetstream.RawStreamMsg) DeadLetter {
	h := m.Header
	num := func(k string) uint64 { n, _ := strconv.ParseUint(h.Get(k), 10, 64); return n }
	return DeadLetter{
		Seq: m.Sequence, Stream: h.Get(events.HeaderDLQStream), Consumer: h.Get(events.HeaderDLQConsumer),
		Subject: h.Get(events.HeaderDLQSubject), OriginalSeq: num(events.HeaderDLQSequence), Deliveries: num(events.HeaderDLQDeliveries),
		Reason: h.Get(events.HeaderDLQReason), Type: h.Get(events.HeaderType), Producer: h.Get(events.HeaderProducer),
		ID: h.Get(events.HeaderOriginalPrefix + events.HeaderMsgID), At: m.Time.UTC(), Size: len(m.Data),
		TraceID: telemetry.TraceIDOf(h.Get("traceparent")),
	}
}

// LatestDeadLetters lists up to limit of the newest dead letters, newest
// first, and how many the stream holds.
func (b *Bus) LatestDeadLetters(ctx context.Context, limit int) ([]DeadLetter, uint64, error) {
	st, err := b.js.Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		return nil, 0, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("dead-letter stream: %w", err)
	}
	var out []DeadLetter
	// Replayed letters leave gaps: look at no more than 10 sequences a letter.
	tries := 10 * limit
	for seq := info.State.LastSeq; info.State.Msgs > 0 && seq >= max(info.State.FirstSeq, 1) && len(out) < limit && tries > 0; seq-- {
		tries--
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // replayed or deleted
		}
		if err != nil {
			return nil, 0, fmt.Errorf("dead letter %d: %w", seq, err)
		}
		out = append(out, deadLetterOf(m))
	}
	return out, info.State.Msgs, nil
}

// Replay publishes dead letter seq again on its original subject, with its
// original headers (the Archivist-DLQ-* ones dropped) and who replayed it
// (actor, in Archivist-Replayed-By), then removes it from the dead-letter
// stream. Handlers are idempotent, so consumers that had
// already processed it are not harmed. The replay gets a message id of its
// own, so it is not mistaken for a duplicate of the original.
func (b *Bus) Replay(ctx context.Context, seq uint64, actor string) (DeadLetter, error) {
	st, m, err := b.readDeadLetter(ctx, seq)
	if err != nil {
		return DeadLetter{}, err
	}
	dl := deadLetterOf(m)
	if dl.Subject == "" {
		return DeadLetter{}, fmt.Errorf("dead letter %d does not say its subject", seq)
	}
	// A replay goes back only where the message came from: the stream and
	// consumer its own subject names (a service publishes dead letters only
	// on its own consumers' subjects; the headers are whatever it wrote),
	// and a subject that consumer reads.
	stream, consumer, ok := events.ParseDeadLetterSubject(m.Subject)
	if !ok {
		return DeadLetter{}, fmt.Errorf("dead letter %d is on subject %q, which names no stream and consumer: not replayed", seq, m.Subject)
	}
	if dl.Stream != stream || dl.Consumer != consumer {
		return DeadLetter{}, fmt.Errorf("dead letter %d says it came from %s/%s but was dead-lettered on %s's subject: not replayed", seq, dl.Stream, dl.Consumer, m.Subject)
	}
	if cons, err := b.js.Consumer(ctx, stream, consumer); err == nil {
		cfg := cons.CachedInfo().Config
		filters := cfg.FilterSubjects
		if cfg.FilterSubject != "" {
			filters = append(filters, cfg.FilterSubject)
		}
		if len(filters) > 0 && !subjectIn(dl.Subject, filters) {
			return DeadLetter{}, fmt.Errorf("dead letter %d names subject %q, which consumer %s does not read %v: not replayed", seq, dl.Subject, consumer, filters)
		}
	}
	src, err := b.js.Stream(ctx, dl.Stream)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter %d came from stream %q: %w", seq, dl.Stream, err)
	}
	if !subjectIn(dl.Subject, src.CachedInfo().Config.Subjects) {
		return DeadLetter{}, fmt.Errorf("dead letter %d names subject %q, which is not one of stream %s's subjects %v: not replayed", seq, dl.Subject, dl.Stream, src.CachedInfo().Config.Subjects)
	}
	if err := sameAsOriginal(ctx, src, dl, m.Data); err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w: not replayed", seq, err)
	}
	out := nats.NewMsg(dl.Subject)
	out.Data = m.Data
	for k, vs := range m.Header {
		if strings.HasPrefix(k, "Archivist-DLQ-") {
			continue
		}
		k = strings.TrimPrefix(k, events.HeaderOriginalPrefix)
		if strings.HasPrefix(k, "Nats-") && k != events.HeaderMsgID {
			continue // a TTL or expectation of the original does not apply now
		}
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	out.Header.Set(events.HeaderMsgID, fmt.Sprintf("%s%s:%d", replayPrefix, out.Header.Get(events.HeaderMsgID), seq))
	if actor != "" {
		out.Header.Set(events.HeaderReplayedBy, actor)
	}
	if _, err := b.js.PublishMsg(ctx, out); err != nil {
		return DeadLetter{}, fmt.Errorf("replay dead letter %d on %s: %w", seq, dl.Subject, err)
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetter{}, fmt.Errorf("remove replayed dead letter %d: %w", seq, err)
	}
	return dl, nil
}

// sameAsOriginal checks a dead letter against the message it says it was,
// where its stream still keeps that (a limits stream: ARCHIVE; CURATION
// keeps an event only until the curator has it, and the curator, which
// writes its letters, is its only consumer):
// the same subject and bytes. A service writes its own consumers' dead
// letters, headers and payload alike, so a compromised one could forge a
// letter a replay would deliver to every consumer of the stream (N32); a
// forged one names a message its stream holds with other bytes, or none it
// ever held. One its stream no longer keeps (a work queue's, deleted when
// moved; an old one aged out) cannot be compared, and is replayed as it is.
func sameAsOriginal(ctx context.Context, src jetstream.Stream, dl DeadLetter, data []byte) error {
	info, err := src.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", dl.Stream, err)
	}
	if dl.OriginalSeq == 0 || dl.OriginalSeq > info.State.LastSeq {
		return fmt.Errorf("it names message %d of %s, which that stream never held (its last is %d)", dl.OriginalSeq, dl.Stream, info.State.LastSeq)
	}
	orig, err := src.GetMsg(ctx, dl.OriginalSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // not kept: nothing to compare with
	}
	if err != nil {
		return fmt.Errorf("message %d of %s: %w", dl.OriginalSeq, dl.Stream, err)
	}
	if orig.Subject != dl.Subject || !bytes.Equal(orig.Data, data) {
		return fmt.Errorf("it differs from message %d of %s, which it says it was (subject %q, %d bytes; the letter's %q, %d bytes)",
			dl.OriginalSeq, dl.Stream, orig.Subject, len(orig.Data), dl.Subject, len(data))
	}
	return nil
}

// DeleteDeadLetter removes dead letter seq, unreplayed (an operator
// looked at it and discards it), and returns what it was.
func (b *Bus) DeleteDeadLetter(ctx context.Context, seq uint64) (DeadLetter, error) {
	st, m, err := b.readDeadLetter(ctx, seq)
	if err != nil {
		return DeadLetter{}, err
	}
	if err := st.DeleteMsg(ctx, seq); err != nil {
		return DeadLetter{}, fmt.Errorf("delete dead letter %d: %w", seq, err)
	}
	return deadLetterOf(m), nil
}

// readDeadLetter reads dead letter seq, with the stream that holds it.
func (b *Bus) readDeadLetter(ctx context.Context, seq uint64) (jetstream.Stream, *jetstream.RawStreamMsg, error) {
	st, err := b.js.Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		return nil, nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, nil, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	return st, m, nil
}

// subjectIn reports whether subject matches one of the patterns ('*' one
// token, '>' the rest).
func subjectIn(subject string, patterns []string) bool {
	toks := strings.Split(subject, ".")
	for _, p := range patterns {
		pt := strings.Split(p, ".")
		match := true
		for i, t := range pt {
			if t == ">" {
				match = len(toks) > i
				break
			}
			if i >= len(toks) || t != "*" && t != toks[i] {
				match = false
				break
			}
			if i == len(pt)-1 && len(toks) != len(pt) {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

// replayPrefix starts the message id of a replayed dead letter.
const replayPrefix = "replay:"

// IsReplay reports whether a message is a dead letter an operator sent
// back (archivist work replay): a handler that drops stale work (an expired
// item) handles a replay anyway, as the operator asked.
func IsReplay(h nats.Header) bool { return strings.HasPrefix(h.Get(events.HeaderMsgID), replayPrefix) }

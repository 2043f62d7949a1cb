package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
)

// Reapplied is what Reapply handed over again.
type Reapplied struct {
	// From and To are the stream sequences read: from the one asked for
	// to the stream's last when Reapply began.
	From, To uint64
	// Handled counts the messages handed to the handler; Undecodable
	// those that were not valid events (the consumer dead-lettered them
	// when they were first delivered).
	Handled, Undecodable int
	// Lost counts the sequences asked for that the stream no longer holds
	// (aged out under its MaxAge or limits): what they said is gone.
	Lost uint64
}

// Reapply hands h again, in stream order, every message of consumer c's
// stream that c takes (its filter subject), from stream sequence from up
// to the stream's last message when it is called, decoded and validated
// as Consume does. It is how a service whose database was restored to a
// backup takes again the events it had acknowledged since (the bus keeps
// them; the database lost their effect): h must be idempotent, as every
// Handler is. A handler error stops the reading and is returned with
// what was handed over until then.
//
// It reads one message a request (the stream's message get, with the
// consumer's subject: the next one it takes), so it needs no consumer of
// its own and no permission beyond what consuming c grants.
func Reapply[T any, PT interface {
	*T
	events.Event
}](ctx context.Context, b *Bus, c events.Consumer, from uint64, h Handler[T]) (Reapplied, error) {
	out := Reapplied{From: max(from, 1)}
	st, err := b.js.Stream(ctx, c.Stream)
	if err != nil {
		return out, fmt.Errorf("reapply %s: stream %s: %w", c.Config.Durable, c.Stream, err)
	}
	info := st.CachedInfo()
	out.To = info.State.LastSeq
	if out.From > out.To {
		return out, nil
	}
	if first := info.State.FirstSeq; first > out.From {
		out.Lost = first - out.From
	}
	subject := c.Config.FilterSubject
	if subject == "" && len(c.Config.FilterSubjects) == 1 {
		subject = c.Config.FilterSubjects[0]
	}
	if subject == "" && len(c.Config.FilterSubjects) > 1 {
		return out, fmt.Errorf("reapply %s: a consumer of %d filter subjects is not supported", c.Config.Durable, len(c.Config.FilterSubjects))
	}
	if subject == "" {
		subject = ">"
	}
	for seq := out.From; seq <= out.To; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break // none left that c takes
		}
		if err != nil {
			return out, fmt.Errorf("reapply %s: read from sequence %d: %w", c.Config.Durable, seq, err)
		}
		if raw.Sequence > out.To {
			break
		}
		seq = raw.Sequence + 1
		env, err := events.Unmarshal(raw.Data)
		if err != nil {
			out.Undecodable++
			continue
		}
		ev, err := events.Decode[T, PT](env)
		if err != nil {
			out.Undecodable++
			continue
		}
		m := &Message[T]{Envelope: env, Event: ev, Subject: raw.Subject, Header: raw.Header,
			Metadata: &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: raw.Sequence}, Stream: c.Stream,
				Consumer: c.Config.Durable, Timestamp: raw.Time}}
		if err := h(ctx, m); err != nil {
			return out, fmt.Errorf("reapply %s: sequence %d (%s %s): %w", c.Config.Durable, raw.Sequence, env.Type, env.ID, err)
		}
		out.Handled++
	}
	return out, nil
}

// AckFloor is the stream sequence up to which the subscription's consumer
// has acknowledged every message it takes: their handlers all returned
// nil, so their effects are stored.
func (s *Subscription) AckFloor(ctx context.Context) (uint64, error) {
	info, err := s.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", s.name, err)
	}
	return info.AckFloor.Stream, nil
}

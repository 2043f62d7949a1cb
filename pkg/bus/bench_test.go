package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// benchEvent is an episode event: about 250 bytes of envelope, the
// smallest real curation event (most of it is the field names).
func benchEvent(i int) *events.EpisodeUpserted {
	e := episode(i)
	e.Title = ""
	e.Media.Key = fmt.Sprintf("a/%d", i)
	return e
}

func benchEnvelopes(b *testing.B, n int) []bus.Outgoing {
	out := make([]bus.Outgoing, n)
	for i := range out {
		env, err := events.New("bench", benchEvent(i))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = bus.Outgoing{Subject: testSubject, Envelope: env}
	}
	return out
}

var benchConsumer = events.Consumer{Stream: testStream.Name, Config: jetstream.ConsumerConfig{
	Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 10000,
}}

// BenchmarkPublishConsumeAck compares, on one embedded server and in one
// run, publish→consume→ack of ~200-byte events through pkg/bus against the
// same work done with raw nats.go: async publish with message ids, a pull
// consumer, msgpack decode, explicit ack. docs/PERFORMANCE.md has figures.
func BenchmarkPublishConsumeAck(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		url := testenv.NATS(b)
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
		ctx := context.Background()
		if _, err := js.CreateOrUpdateStream(ctx, testStream); err != nil {
			b.Fatal(err)
		}
		cons, err := js.CreateOrUpdateConsumer(ctx, testStream.Name, benchConsumer.Config)
		if err != nil {
			b.Fatal(err)
		}
		batch := benchEnvelopes(b, b.N)
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		cc, err := cons.Consume(func(m jetstream.Msg) {
			var env events.Envelope
			if err := msgpack.Unmarshal(m.Data(), &env); err != nil {
				b.Error(err)
			}
			var e events.EpisodeUpserted
			if err := msgpack.Unmarshal(env.Payload, &e); err != nil {
				b.Error(err)
			}
			m.Ack()
			if got.Add(1) == int64(b.N) {
				close(done)
			}
		}, jetstream.PullMaxMessages(500))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Stop()
		for _, o := range batch {
			data, _ := o.Envelope.Marshal()
			m := nats.NewMsg(o.Subject)
			m.Data = data
			m.Header.Set(events.HeaderMsgID, o.Envelope.ID)
			m.Header.Set(events.HeaderType, o.Envelope.Type)
			m.Header.Set(events.HeaderProducer, o.Envelope.Producer)
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		<-done
		b.StopTimer()
		report(b, batch)
	})

	b.Run("bus", func(b *testing.B) {
		bs := testenv.Bus(b, "bench")
		ctx := context.Background()
		if _, err := bs.JetStream().CreateOrUpdateStream(ctx, testStream); err != nil {
			b.Fatal(err)
		}
		batch := benchEnvelopes(b, b.N)
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		sub, err := bus.Consume(ctx, bs, benchConsumer, func(_ context.Context, m *bus.Message[events.EpisodeUpserted]) error {
			if got.Add(1) == int64(b.N) {
				close(done)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := bs.PublishBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
		<-done
		b.StopTimer()
		report(b, batch)
		sub.Stop(ctx)
	})
}

func report(b *testing.B, batch []bus.Outgoing) {
	m, _ := bus.NewMsg(testSubject, batch[0].Envelope)
	b.ReportMetric(float64(len(m.Data)), "bytes/msg")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

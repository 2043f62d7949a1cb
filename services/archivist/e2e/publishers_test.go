package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/archivist/keycmd"
	"github.com/archivist/archivist/services/curator/curator"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
)

// TestEachPublisherHasItsOwnNATSUser: a curating system's NATS user, made
// by `archivist key new NAME --nats --source SOURCE` and rendered into the
// server's users by `archivist nats-auth`, publishes only its own source's
// curation events (the curator stores them as that source) and reads only
// its own rejections, live on rejected.<source> or kept, from its pull
// consumer on REJECTED: an event dated 9999 comes back there with its
// reason and is not stored. Users are issued and revoked by rendering the
// file again and reloading the server, which keeps running: the revoked
// system is disconnected and refused, the new one admitted.
func TestEachPublisherHasItsOwnNATSUser(t *testing.T) {
	dir := t.TempDir()
	passwords := map[string]string{}
	var lines []string
	issue := func(name, source string) {
		pw, line, err := keycmd.NewPublisher(name, source)
		if err != nil {
			t.Fatal(err)
		}
		passwords[name] = pw
		lines = append(lines, line)
	}
	conf := filepath.Join(dir, "auth.conf")
	render := func() {
		t.Helper()
		pubs := filepath.Join(dir, "publishers")
		if err := os.WriteFile(pubs, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := keycmd.NATSAuth(pubs, &out); err != nil {
			t.Fatalf("nats-auth: %v", err)
		}
		if err := os.WriteFile(conf, []byte(out.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issue("radio-sys", "radio")
	issue("tv-sys", "tv")
	render()
	sec := securedNATSWith(t, conf, false)
	url, reload := sec.url, sec.reload
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: url, DBURL: testenv.DBURL(t, curatormigrations.Schema)}, as("curator"))

	connect := func(name string, errs chan error) (*nats.Conn, error) {
		// bcrypt makes each sign-in slow on purpose (seconds under -race).
		return nats.Connect(url, nats.UserInfo(name, passwords[name]), nats.CustomInboxPrefix(events.InboxPrefix(name)), nats.Timeout(30*time.Second),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case errs <- err:
				default:
				}
			}))
	}
	radioErrs := make(chan error, 10)
	radio, err := connect("radio-sys", radioErrs)
	if err != nil {
		t.Fatal(err)
	}
	defer radio.Close()
	js, _ := jetstream.New(radio)
	ctx := context.Background()
	publishWithin := func(d time.Duration, subject string, env events.Envelope) (*jetstream.PubAck, error) {
		b, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return js.Publish(ctx, subject, b, jetstream.WithMsgID(env.ID))
	}
	publish := func(subject string, env events.Envelope) (*jetstream.PubAck, error) {
		return publishWithin(10*time.Second, subject, env)
	}
	ep := func(id string) *events.EpisodeUpserted {
		at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
		return &events.EpisodeUpserted{ID: id, Title: id, Media: events.Media{Key: "audio/" + id + ".mp3"}, InitialCuratedAt: at, LatestCuratedAt: at}
	}

	// Its own subject: acknowledged, and stored as its source.
	own, _ := events.New("radio-sys", ep("ep-1"))
	if ack, err := publish(events.CurationSubject("radio", events.TypeEpisodeUpserted), own); err != nil || ack.Stream != events.StreamCuration {
		t.Fatalf("radio-sys on its own subject: %v %v", ack, err)
	}
	// Another's subject, another's rejections, another's consumer: refused.
	other, _ := events.New("radio-sys", ep("ep-2"))
	// The server says "Permissions Violation" (asynchronously); the call
	// itself gets no answer.
	refused := func(what string, f func() error) {
		t.Helper()
		for len(radioErrs) > 0 {
			<-radioErrs
		}
		callErr := f()
		radio.Flush()
		select {
		case err := <-radioErrs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("radio-sys %s: %v (call: %v), want a permissions violation", what, err, callErr)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("radio-sys %s: no permissions violation (call: %v)", what, callErr)
		}
	}
	refused("publishes as tv", func() error {
		_, err := publishWithin(time.Second, events.CurationSubject("tv", events.TypeEpisodeUpserted), other)
		return err
	})
	refused("publishes on the unsourced subject", func() error {
		_, err := publishWithin(time.Second, events.SubjectEpisodeUpsertedUnsourced, other)
		return err
	})
	refused("reads tv's rejections", func() error { _, err := radio.SubscribeSync(events.RejectedSubject("tv")); return err })
	refused("reads tv's kept rejections", func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := js.CreateOrUpdateConsumer(ctx, events.StreamRejected, jetstream.ConsumerConfig{Durable: "rejected-tv", FilterSubject: events.RejectedSubject("tv")})
		return err
	})

	// Its rejections: live and kept.
	live, err := radio.SubscribeSync(events.RejectedSubject("radio"))
	if err != nil {
		t.Fatal(err)
	}
	radio.Flush()
	future, _ := events.NewAt("radio-sys", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), ep("from-9999"))
	if _, err := publish(events.CurationSubject("radio", events.TypeEpisodeUpserted), future); err != nil {
		t.Fatal(err)
	}
	msg, err := live.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no rejection on rejected.radio: %v", err)
	}
	rejection := func(data []byte) *events.Rejected {
		t.Helper()
		env, err := events.Unmarshal(data)
		if err != nil {
			t.Fatal(err)
		}
		r, err := events.Decode[events.Rejected](env)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := rejection(msg.Data); r.EventID != future.ID || !strings.Contains(r.Reason, "future") {
		t.Errorf("rejection %+v, want event %s refused for its time", r, future.ID)
	}
	// The curator made radio's pull consumer; radio may read it, and not
	// make or change it: a push consumer's deliver subject is not checked
	// against its creator's permissions (N30), so radio could have had its
	// rejections delivered onto another's subject.
	refused("makes its rejections consumer push onto tv's subject", func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		cfg := events.RejectedConsumer("radio")
		cfg.DeliverSubject = events.CurationSubject("tv", events.TypeEpisodeUpserted)
		_, err := js.CreateOrUpdateConsumer(ctx, events.StreamRejected, cfg)
		return err
	})
	cons, err := js.Consumer(ctx, events.StreamRejected, events.RejectedConsumer("radio").Durable)
	if err != nil {
		t.Fatalf("radio-sys's own rejections consumer: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		n++
		if r := rejection(m.Data()); r.EventID != future.ID {
			t.Errorf("kept rejection %+v", r)
		}
		if err := m.Ack(); err != nil {
			t.Errorf("ack its rejection: %v", err)
		}
	}
	if n != 1 {
		t.Errorf("radio-sys fetched %d kept rejections, want 1", n)
	}

	// Revoke radio-sys and issue news-sys: render, reload; no restart.
	lines = lines[1:]
	issue("news-sys", "news")
	render()
	closed := make(chan struct{})
	radio.SetClosedHandler(func(*nats.Conn) { close(closed) })
	radio.SetReconnectHandler(func(*nats.Conn) {})
	if err := reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		if radio.IsConnected() {
			if _, err := publish(events.CurationSubject("radio", events.TypeEpisodeUpserted), other); err == nil {
				t.Error("the revoked radio-sys still publishes after the reload")
			}
		}
	}
	if nc, err := connect("radio-sys", make(chan error, 1)); err == nil {
		nc.Close()
		t.Error("the revoked radio-sys connected after the reload")
	}
	news, err := connect("news-sys", make(chan error, 1))
	if err != nil {
		t.Fatalf("news-sys, issued with a reload: %v", err)
	}
	defer news.Close()
	newsJS, _ := jetstream.New(news)
	b, _ := own.Marshal()
	if _, err := newsJS.Publish(ctx, events.CurationSubject("news", events.TypeEpisodeUpserted), b, jetstream.WithMsgID("news-1")); err != nil {
		t.Errorf("news-sys publishing: %v", err)
	}
}

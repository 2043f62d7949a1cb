package curator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
)

// TestRejectionsGoToTheirSource: a curation event's source is its
// subject's (curation.<source>.…, the subject its publisher's NATS user may
// publish on): a payload naming another source is refused, one naming none
// takes the subject's. Every refused event (another source, a time far
// ahead, bytes that are no event) is dead-lettered for operators and its
// rejection, with the event's id and the reason, goes to
// rejected.<source>, which that source's publisher reads, and to no other.
func TestRejectionsGoToTheirSource(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	nc := h.bus.Conn()
	got := map[string]chan *nats.Msg{}
	for _, src := range []string{"radio", "tv"} {
		got[src] = make(chan *nats.Msg, 10)
		sub, err := nc.ChanSubscribe(events.RejectedSubject(src), got[src])
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	nc.Flush()
	publish := func(env events.Envelope) {
		t.Helper()
		if _, err := h.bus.Publish(ctx, events.CurationSubject("radio", events.TypeEpisodeUpserted), env); err != nil {
			t.Fatal(err)
		}
	}
	posing := episode("posing", "as tv")
	posing.Source = "tv"
	env1, _ := events.New("radio", posing)
	publish(env1)
	env2, _ := events.NewAt("radio", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), episode("future", "from 9999"))
	publish(env2)
	m := nats.NewMsg(events.CurationSubject("radio", events.TypeClipUpserted))
	m.Data = []byte("garbage")
	m.Header.Set(events.HeaderMsgID, "garbage-1")
	if _, err := h.bus.JetStream().PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{env1.ID: `names source "tv"`, env2.ID: "in the future", "garbage-1": "decode"}
	for range want {
		select {
		case msg := <-got["radio"]:
			env, err := events.Unmarshal(msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			r, err := events.Decode[events.Rejected](env)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[r.EventID]
			if !ok || !strings.Contains(r.Reason, w) || !strings.HasPrefix(r.Subject, "curation.radio.") || r.Sequence == 0 {
				t.Errorf("rejection %+v, want one of %v", r, want)
			}
			delete(want, r.EventID)
		case <-time.After(15 * time.Second):
			t.Fatalf("rejections still missing: %v", want)
		}
	}
	select {
	case msg := <-got["tv"]:
		t.Errorf("tv was told of radio's rejection: %s", msg.Data)
	case <-time.After(200 * time.Millisecond):
	}
	for _, id := range []string{"tv:posing", "radio:posing", "radio:future"} {
		if _, err := h.cat.Get(ctx, catalog.Episode, id); err == nil {
			t.Errorf("%s was stored", id)
		}
	}
	// Kept too: the publisher reads what it missed from REJECTED.
	st, err := h.bus.JetStream().Stream(ctx, events.StreamRejected)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Errorf("REJECTED holds %+v %v, want 3", info.State, err)
	}
	// A payload naming no source takes its subject's, whoever produced it.
	plain, _ := events.New("some-relay", episode("plain", "no source"))
	publish(plain)
	h.waitRecord(t, catalog.Episode, "radio:plain", func(catalog.Record) bool { return true })
}

package curator_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
)

// TestAOneSidedLinkTakesNoWork (N20): a publisher whose source sorts
// before another's posts a record with a one-sided same_as to the other's
// episode and its own media, at the highest priority. The other's work
// keeps its key, title and media; the link is refused with its reason,
// shown with the record; the priority is lowered to CURATOR_MAX_PRIORITY.
// Once the other links back the two are one work, and when it stops, two
// again.
func TestAOneSidedLinkTakesNoWork(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	db := h.cat.DB()
	publish := func(source string, ev *events.EpisodeUpserted) {
		t.Helper()
		env, err := events.New(source, ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.bus.Publish(ctx, subjectOf(env), env); err != nil {
			t.Fatal(err)
		}
	}
	type work struct {
		State, Redirect, Title, Media string
		Members                       []string
		Priority                      int32
	}
	workOf := func(key string) (w work) {
		db.QueryRow(ctx, `SELECT state, redirect_to, title, media_key, members, priority FROM curator.works WHERE kind = 'episode' AND key = $1`, key).
			Scan(&w.State, &w.Redirect, &w.Title, &w.Media, &w.Members, &w.Priority)
		return w
	}
	victim := episode("ep-1", "the BBC's own")
	publish("bbc", victim)
	waitFor(t, "bbc:ep-1's work", func() bool { return workOf("bbc:ep-1").State == "work" })

	taker := episode("x", "taken over")
	taker.Media = events.Media{Key: "audio/aaa-x.mp3"}
	taker.Priority = math.MaxInt32
	taker.SameAs = []events.Ref{{Source: "bbc", ID: "ep-1"}}
	publish("aaa", taker)
	waitFor(t, "aaa:x's work", func() bool { return workOf("aaa:x").State == "work" })
	if w := workOf("bbc:ep-1"); w.State != "work" || w.Title != "the BBC's own" || w.Media != "audio/ep-1.mp3" || len(w.Members) != 1 {
		t.Errorf("bbc:ep-1 after aaa's one-sided link: %+v, want its own work, title and media", w)
	}
	if w := workOf("aaa:x"); w.Priority != 1000 || len(w.Members) != 1 {
		t.Errorf("aaa:x: %+v, want a work of its own at priority 1000 (CURATOR_MAX_PRIORITY)", w)
	}
	code, body := getJSON(t, h.api+"/v1/episodes/aaa:x")
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(body["refused_same_as"]), matcher.Unreciprocated) {
		t.Errorf("aaa:x: %d %v, want its refused link and why", code, body)
	}

	// The BBC links back: one work, by the merge rules.
	victim.SameAs = []events.Ref{{Source: "aaa", ID: "x"}}
	victim.LatestCuratedAt = victim.LatestCuratedAt.Add(1)
	publish("bbc", victim)
	waitFor(t, "one work once the link is returned", func() bool {
		w := workOf("aaa:x")
		return w.State == "work" && slices.Equal(w.Members, []string{"aaa:x", "bbc:ep-1"}) && workOf("bbc:ep-1").Redirect == "aaa:x"
	})
	// And withdraws it: two again.
	victim.SameAs = nil
	victim.LatestCuratedAt = victim.LatestCuratedAt.Add(1)
	publish("bbc", victim)
	waitFor(t, "two works once the link is withdrawn", func() bool {
		w := workOf("bbc:ep-1")
		return w.State == "work" && len(w.Members) == 1 && len(workOf("aaa:x").Members) == 1
	})
}

// TestANATSPublisherCannotTakeAnIdempotencyKeyFirst (N31): CURATION
// de-duplicates by message id over the whole stream; a NATS publisher
// that sends an event whose id is another's Idempotency-Key first does
// not make the other's POST a "duplicate" stored nowhere: the API's
// message id is an HMAC no publisher can make. A retry of the POST is
// still its duplicate.
func TestANATSPublisherCannotTakeAnIdempotencyKeyFirst(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	const key = "their-key-1"
	squat := episode("squat", "squatting")
	env, err := events.New("tv", squat)
	if err != nil {
		t.Fatal(err)
	}
	env.ID = key
	if _, err := h.bus.Publish(ctx, subjectOf(env), env); err != nil {
		t.Fatal(err)
	}
	body := `{"id":"ep-key","title":"Posted","media":{"key":"audio/ep-key.mp3","sha256":""},"duration_ms":60000,
		"priority":1,"initial_curated_at":"2026-01-01T00:00:00Z","latest_curated_at":"2026-01-02T00:00:00Z"}`
	status, out := post(t, h.api+"/v1/episodes", "application/json", []byte(body), map[string]string{"Idempotency-Key": key})
	if status != http.StatusAccepted || out["duplicate"] == true {
		t.Fatalf("POST with a key a NATS publisher sent first: %d %v, want a new event", status, out)
	}
	status, out = post(t, h.api+"/v1/episodes", "application/json", []byte(body), map[string]string{"Idempotency-Key": key})
	if status != http.StatusAccepted || out["duplicate"] != true {
		t.Errorf("its retry: %d %v, want a duplicate", status, out)
	}
	h.waitRecord(t, catalog.Episode, "http:ep-key", func(catalog.Record) bool { return true })
}

package workcmd

import (
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/work"
)

// TestADeadLetterMatchesAsAServicesItemWould: the work filter reads a
// dead letter as a service's source reads its rows: every field set must
// match; a query is its sequence or a key exactly, or every word of it in
// the reason; a collection or a submitter matches none (a dead letter has
// neither); an age counts from when it was dead-lettered.
func TestADeadLetterMatchesAsAServicesItemWould(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	it := Item(bus.DeadLetter{Seq: 7, Stream: "CURATION", Consumer: "curator-clips", Subject: "curation.radio.clip.upserted",
		OriginalSeq: 3, Deliveries: 5, Reason: "gave up after 5 deliveries: Undecodable envelope", ID: "ev-1", Producer: "radio",
		At: now.Add(-2 * time.Hour)})
	if it.Ref() != "bus/dead-letter/7" || it.State != "dead" || it.Attempts != 5 || len(it.Verbs) != 2 {
		t.Fatalf("item %+v", it)
	}
	for _, c := range []struct {
		f    work.Filter
		want bool
	}{
		{work.Filter{}, true},
		{work.Filter{Pipeline: "bus", Kind: "dead-letter", ID: "7"}, true},
		{work.Filter{ID: "8"}, false},
		{work.Filter{Pipeline: "ingest"}, false},
		{work.Filter{States: []string{"failed"}}, false},
		{work.Filter{States: []string{"failed", "dead"}}, true},
		{work.Filter{Query: "7"}, true},
		{work.Filter{Query: "curator-clips"}, true},
		{work.Filter{Query: "CURATION/curator-clips#3"}, true},
		{work.Filter{Query: "ev-1"}, true},
		{work.Filter{Query: "undecodable ENVELOPE"}, true},
		{work.Filter{Query: "undecodable clip"}, false},
		{work.Filter{Collection: "maps"}, false},
		{work.Filter{Submitter: "radio"}, false},
		{work.Filter{OlderThan: time.Hour}, true},
		{work.Filter{OlderThan: 3 * time.Hour}, false},
	} {
		if got := matches(c.f, it, now); got != c.want {
			t.Errorf("%+v matches: %v, want %v", c.f, got, c.want)
		}
	}
	for _, c := range []struct {
		v    work.Verb
		f    work.Filter
		want bool
	}{
		{work.Replay, work.Filter{}, true},
		{work.Retry, work.Filter{}, false},
		{work.Delete, work.Filter{Pipeline: "bus"}, true},
		{work.Delete, work.Filter{Kind: "dead-letter"}, true},
		{work.Replay, work.Filter{Pipeline: "ingest"}, false},
	} {
		if got := ForDeadLetters(c.v, c.f); got != c.want {
			t.Errorf("%s %+v is for dead letters: %v, want %v", c.v, c.f, got, c.want)
		}
	}
}

// TestNewestKeepsTheLastItems: the ring keeps the last n items given,
// newest first, whether it filled or not.
func TestNewestKeepsTheLastItems(t *testing.T) {
	for _, c := range []struct{ n, given int }{{3, 0}, {3, 2}, {3, 3}, {3, 7}, {1, 5}} {
		k := &newest{n: c.n}
		for i := range c.given {
			k.add(work.Item{ID: string(rune('a' + i))})
		}
		var got string
		for _, it := range k.list() {
			got += it.ID
		}
		want := ""
		for i := c.given - 1; i >= max(0, c.given-c.n); i-- {
			want += string(rune('a' + i))
		}
		if got != want {
			t.Errorf("n %d, given %d: %q, want %q", c.n, c.given, got, want)
		}
	}
}

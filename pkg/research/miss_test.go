package research_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
)

// TestAMissIsKeptWithItsResult: a result without occurrences that says why
// (events.Miss) is stored with its explanation, and the episode's history
// tells the clip's best candidate and the stage that refused it; a result
// without one says nothing more.
func TestAMissIsKeptWithItsResult(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema), retryNow())
	ctx := context.Background()
	add(t, s, work("episode", "ep", 1, 1), work("clip", "buried", 2, 1), work("clip", "plain", 1, 1))
	l := lease(t, s, 2)
	snr := -16.0
	miss := &events.Miss{Candidates: []events.MissCandidate{
		{OffsetMS: 29984, Votes: 30, Needed: 11, Hashes: 374, Confidence: 0.99, Similarity: 0.21, Waveform: 0.15, SNRDB: &snr, Speed: 1, Stage: "unlike"},
		{OffsetMS: 3840, Votes: 5, Needed: 11, Hashes: 356, Confidence: 0.01, Speed: 1.02, Stage: "landmarks"},
	}}
	for _, r := range []*events.ResearchCompleted{
		{LeaseID: l.ID, Episode: "ep", Clip: "buried", Researcher: "r", Miss: miss},
		{LeaseID: l.ID, Episode: "ep", Clip: "plain", Researcher: "r", Final: true, Sent: 2},
	} {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		if stored, err := s.StoreResult(ctx, r); err != nil || !stored {
			t.Fatalf("%s: stored %v, %v", r.Clip, stored, err)
		}
	}
	var stage string
	var votes int
	if err := s.DB().QueryRow(ctx, `SELECT r.miss->'candidates'->0->>'stage', (r.miss->'candidates'->0->>'votes')::int FROM research.results r
		JOIN research.clips c ON c.id = r.clip_id WHERE c.key = 'buried'`).Scan(&stage, &votes); err != nil || stage != "unlike" || votes != 30 {
		t.Fatalf("the stored miss: %q %d %v", stage, votes, err)
	}
	h, err := s.History(ctx, "ep")
	if err != nil {
		t.Fatal(err)
	}
	var buried, plain string
	for _, e := range h.Events {
		switch {
		case strings.HasPrefix(e.Detail, "buried:"):
			buried = e.Detail
		case strings.HasPrefix(e.Detail, "plain:"):
			plain = e.Detail
		}
	}
	if !strings.Contains(buried, "the best candidate, at 29.98 s: 30 of 374 landmarks (11 needed), refused at the unlike stage") {
		t.Errorf("the buried clip's history: %q", buried)
	}
	if plain == "" || strings.Contains(plain, "candidate") {
		t.Errorf("the plain clip's history: %q", plain)
	}
	bad := &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: "plain", Researcher: "r", Miss: miss,
		Occurrences: []events.Occurrence{{OffsetMS: 1, DurationMS: 1, Confidence: 0.9}}}
	if err := bad.Validate(); err == nil {
		t.Error("a miss with occurrences validated")
	}
	// JSON carries no NaN: an explanation with one is refused where it is
	// made (the researcher then sends the result without it), not where
	// the cwa would fail to store it.
	nan := &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: "plain", Researcher: "r",
		Miss: &events.Miss{Candidates: []events.MissCandidate{{Votes: 3, Needed: 4, Hashes: 9, Similarity: math.NaN(), Speed: 1, Stage: "votes"}}}}
	if err := nan.Validate(); err == nil {
		t.Error("a miss with a NaN validated")
	}
}

package research_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
)

func storeWith(t *testing.T, edit func(*research.Config)) *research.Store {
	cfg := research.DefaultConfig()
	edit(&cfg)
	return research.New(testenv.DB(t, migrations.Schema), research.WithConfig(cfg))
}

// expire has a researcher take lease l (Hold), then lets it run out.
func expire(t *testing.T, s *research.Store, l *research.Lease) {
	t.Helper()
	if ok, err := s.Hold(context.Background(), l.ID, time.Minute); err != nil || !ok {
		t.Fatalf("hold: %v %v", ok, err)
	}
	if _, err := s.DB().Exec(context.Background(), `UPDATE research.leases SET expires_at = now() - interval '1 second' WHERE id = $1`, l.ID); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.ExpireLeases(context.Background()); err != nil || len(ids) != 1 {
		t.Fatalf("expire: %v %v", ids, err)
	}
}

func episodeRow(t *testing.T, s *research.Store, key string) (failures int, parked *string, backingOff bool) {
	t.Helper()
	if err := s.DB().QueryRow(context.Background(), `SELECT failures, parked_reason, next_attempt_at > now() FROM research.episodes WHERE key = $1`, key).
		Scan(&failures, &parked, &backingOff); err != nil {
		t.Fatal(err)
	}
	return
}

// TestLeasesThatExpireCountAndPark: a researcher that crashes, hangs or
// loses the item on every lease of an episode used to have it re-leased
// every lease duration for ever. Each expired lease a researcher had taken
// now counts a failure of the episode, which backs off, and after
// RESEARCH_MAX_ATTEMPTS it parks.
func TestLeasesThatExpireCountAndPark(t *testing.T) {
	s := storeWith(t, func(c *research.Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour })
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	// A lease whose item no researcher took (none was free in time) is no
	// one's failure: it runs out, and the episode is leased again at once.
	untaken := lease(t, s, 8)
	if _, err := s.DB().Exec(context.Background(), `UPDATE research.leases SET expires_at = now() - interval '1 second' WHERE id = $1`, untaken.ID); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.ExpireLeases(context.Background()); err != nil || len(ids) != 1 {
		t.Fatalf("expire: %v %v", ids, err)
	}
	if failures, _, backingOff := episodeRow(t, s, "ep"); failures != 0 || backingOff {
		t.Fatalf("a lease nobody took counted: %d failures, backing off %v", failures, backingOff)
	}
	expire(t, s, lease(t, s, 8))
	if failures, parked, backingOff := episodeRow(t, s, "ep"); failures != 1 || parked != nil || !backingOff {
		t.Fatalf("after one expired lease: %d failures, parked %v, backing off %v", failures, parked, backingOff)
	}
	if l := lease(t, s, 8); l != nil {
		t.Fatalf("leased again while backing off: %+v", l)
	}

	s = storeWith(t, func(c *research.Config) { c.RetryBase, c.RetryMax, c.MaxAttempts = 0, 0, 3 })
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	for range 3 {
		l := lease(t, s, 8)
		if l == nil {
			t.Fatal("not leased")
		}
		expire(t, s, l)
	}
	failures, parked, _ := episodeRow(t, s, "ep")
	if failures != 3 || parked == nil || !strings.Contains(*parked, "gave up after 3 failed attempts") || !strings.Contains(*parked, "crashed, hung or lost") {
		t.Fatalf("after 3 expired leases: %d failures, parked %v", failures, parked)
	}
	if l := lease(t, s, 8); l != nil {
		t.Fatalf("a parked episode was leased: %+v", l)
	}
}

// TestMissingMediaWaitsAndIsResearchedWhenItArrives: media that arrives
// after its curation record used to fail the clip (or park the episode) for
// good. It now waits, backing off, and is leased again at once when it
// arrives; only after RESEARCH_MEDIA_WAIT does it park.
func TestMissingMediaWaitsAndIsResearchedWhenItArrives(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t, func(c *research.Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour })
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 2, 1), work("clip", "b", 1, 1))
	l := lease(t, s, 8)
	missing := &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: "a", Researcher: "r",
		Failure: "audio/a: blob not found", FailureKind: events.FailureMediaMissing}
	if stored, err := s.StoreResult(ctx, missing); err != nil || stored {
		t.Fatalf("missing media stored as a result: %v %v", stored, err)
	}
	if _, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: "b", Researcher: "r", Final: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if again := lease(t, s, 8); again != nil {
		t.Fatalf("leased again before the media arrived or the wait ended: %+v", again)
	}
	if n, err := s.MediaArrived(ctx, "audio/a"); err != nil || n != 1 {
		t.Fatalf("media arrived: %d %v", n, err)
	}
	again := lease(t, s, 8)
	if again == nil || len(again.Clips) != 1 || again.Clips[0].Key != "a" {
		t.Fatalf("after the media arrived: %+v, want clip a leased again", again)
	}
	if stored, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: again.ID, Episode: "ep", Clip: "a", Researcher: "r"}); err != nil || !stored {
		t.Fatalf("result once the media arrived: %v %v", stored, err)
	}
	var state string
	var failures int
	s.DB().QueryRow(ctx, `SELECT p.state, p.failures FROM research.pairs p JOIN research.clips c ON c.id = p.clip_id WHERE c.key = 'a'`).Scan(&state, &failures)
	if state != "researched" {
		t.Errorf("pair a is %s (%d failures), want researched", state, failures)
	}

	// Past the wait (3 failures over RESEARCH_MEDIA_WAIT) it parks, with the reason.
	s = storeWith(t, func(c *research.Config) { c.RetryBase, c.RetryMax, c.MediaWait = 0, 0, time.Nanosecond })
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	for i := range 3 {
		l := lease(t, s, 8)
		if l == nil {
			t.Fatalf("attempt %d: not leased", i+1)
		}
		m := *missing
		m.LeaseID, m.Final = l.ID, true
		if _, err := s.StoreResult(ctx, &m); err != nil {
			t.Fatal(err)
		}
		s.Revoke(ctx, l.ID)
		s.ReleaseDue(ctx)
	}
	var failure *string
	s.DB().QueryRow(ctx, `SELECT r.failure FROM research.results r JOIN research.clips c ON c.id = r.clip_id WHERE c.key = 'a'`).Scan(&failure)
	if failure == nil || !strings.Contains(*failure, "blob not found") {
		t.Fatalf("after the wait: failure %v, want the pair parked with the reason", failure)
	}
	// ...and is released when the media arrives after all.
	if n, err := s.MediaArrived(ctx, "audio/a"); err != nil || n != 1 {
		t.Fatalf("media arrived after parking: %d %v", n, err)
	}
	if l := lease(t, s, 8); l == nil {
		t.Fatal("a pair parked for missing media was not leased again when it arrived")
	}
}

// TestEpisodeFailuresThatMayPassAndStaleOnes: an episode whose own media
// is missing backs off instead of parking, and is due when it arrives; a
// failure reported by a lease made before the media changed never parks it.
func TestEpisodeFailuresThatMayPassAndStaleOnes(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t, func(c *research.Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour })
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	l := lease(t, s, 8)
	if known, parked, err := s.EpisodeFailure(ctx, l.ID, "ep", "audio/ep: blob not found", events.FailureMediaMissing); err != nil || !known || parked {
		t.Fatalf("missing episode media: known %v parked %v %v", known, parked, err)
	}
	s.Revoke(ctx, l.ID)
	if again := lease(t, s, 8); again != nil {
		t.Fatal("leased while waiting for its media")
	}
	if _, err := s.MediaArrived(ctx, "audio/ep"); err != nil {
		t.Fatal(err)
	}
	l = lease(t, s, 8)
	if l == nil {
		t.Fatal("not leased once its media arrived")
	}
	// The media changes while that lease runs; its permanent failure,
	// computed from the old media, is stale.
	w := work("episode", "ep", 1, 1)
	w.Version, w.Media.Key = day.Add(time.Hour), "audio/ep-fixed"
	add(t, s, w)
	if _, parked, err := s.EpisodeFailure(ctx, l.ID, "ep", "corrupt audio", ""); err != nil || parked {
		t.Fatalf("a stale failure parked the episode with new media: %v %v", parked, err)
	}
	if _, parkedReason, _ := episodeRow(t, s, "ep"); parkedReason != nil {
		t.Fatalf("parked: %s", *parkedReason)
	}
}

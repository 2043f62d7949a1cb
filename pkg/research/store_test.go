package research_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var day = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func work(kind, key string, priority int32, initialDay int) *events.WorkUpserted {
	return &events.WorkUpserted{Kind: kind, Key: key, Version: day, State: events.WorkMerged,
		Media: events.Media{Key: "audio/" + key}, Priority: priority,
		InitialCuratedAt: day.AddDate(0, 0, initialDay), LatestCuratedAt: day.AddDate(0, 1, 0)}
}

func add(t *testing.T, s *research.Store, works ...*events.WorkUpserted) {
	t.Helper()
	for _, w := range works {
		if _, _, err := s.ApplyWork(context.Background(), w); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(refs []events.AudioRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Key
	}
	return out
}

func lease(t *testing.T, s *research.Store, max int) *research.Lease {
	t.Helper()
	l, err := s.Lease(context.Background(), max, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSelectionOrder(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	// Episodes: priority first, then newest initial curation; ties on both
	// fall back to arrival order.
	add(t, s,
		work("clip", "c-low-old", 1, 1), work("clip", "c-high-old", 5, 1), work("clip", "c-high-new", 5, 9),
		work("clip", "c-mid", 3, 5), work("clip", "c-low-new", 1, 9),
		work("episode", "e-low", 1, 30), work("episode", "e-high-old", 9, 1),
		work("episode", "e-high-new", 9, 20), work("episode", "e-mid", 5, 40))
	// An episode stays first while it has unleased clips.
	l := lease(t, s, 2)
	if l.Episode.Key != "e-high-new" || !slices.Equal(keys(l.Clips), []string{"c-high-new", "c-high-old"}) {
		t.Fatalf("first lease: %s %v, want e-high-new with the priority-5 clips newest first", l.Episode.Key, keys(l.Clips))
	}
	l = lease(t, s, 5)
	if l.Episode.Key != "e-high-new" || !slices.Equal(keys(l.Clips), []string{"c-mid", "c-low-new", "c-low-old"}) {
		t.Fatalf("second lease: %s %v, want the rest of e-high-new", l.Episode.Key, keys(l.Clips))
	}
	for _, ep := range []string{"e-high-old", "e-mid", "e-low"} {
		l := lease(t, s, 5)
		if l == nil || l.Episode.Key != ep || len(l.Clips) != 5 {
			t.Fatalf("lease: %+v, want all of %s", l, ep)
		}
	}
	if l := lease(t, s, 5); l != nil {
		t.Errorf("leased with nothing open: %+v", l)
	}
}

func TestMaxClipsAndSkippingLeasedAndResearched(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	ctx := context.Background()
	add(t, s, work("episode", "ep", 1, 1))
	for i := range 10 {
		add(t, s, work("clip", fmt.Sprintf("c%d", i), int32(10-i), 1))
	}
	// c0 and c1 researched before any lease (a late result), c2 and c3 leased.
	for _, c := range []string{"c0", "c1"} {
		if _, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: "00000000-0000-0000-0000-000000000001", Episode: "ep", Clip: c, Researcher: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	first := lease(t, s, 2)
	if got := keys(first.Clips); !slices.Equal(got, []string{"c2", "c3"}) {
		t.Fatalf("first lease %v, want [c2 c3]: researched clips are skipped", got)
	}
	second := lease(t, s, 4)
	if got := keys(second.Clips); !slices.Equal(got, []string{"c4", "c5", "c6", "c7"}) {
		t.Fatalf("second lease %v, want 4 clips after the leased ones", got)
	}
	third := lease(t, s, 4)
	if got := keys(third.Clips); !slices.Equal(got, []string{"c8", "c9"}) {
		t.Fatalf("third lease %v", got)
	}
	if l := lease(t, s, 4); l != nil {
		t.Fatalf("a fourth lease of a fully leased episode: %+v", l)
	}
	// Revoking the first lease frees c2 and c3 again.
	if ok, err := s.Revoke(ctx, first.ID); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if l := lease(t, s, 4); l == nil || !slices.Equal(keys(l.Clips), []string{"c2", "c3"}) {
		t.Fatalf("after revoke: %+v", l)
	}
}

// retryNow is the default configuration without waits between attempts.
func retryNow() research.Option {
	cfg := research.DefaultConfig()
	cfg.RetryBase, cfg.RetryMax = 0, 0
	return research.WithConfig(cfg)
}

func TestExpiredLeaseFreesOnlyUnfinishedClips(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema), retryNow())
	ctx := context.Background()
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 3, 1), work("clip", "b", 2, 1), work("clip", "c", 1, 1))
	l, err := s.Lease(ctx, 3, 50*time.Millisecond)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if stored, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: "a", Researcher: "r"}); err != nil || !stored {
		t.Fatal(stored, err)
	}
	time.Sleep(100 * time.Millisecond)
	if ok, _ := s.Extend(ctx, l.ID, time.Minute); ok {
		t.Error("an expired lease was extended")
	}
	expired, err := s.ExpireLeases(ctx)
	if err != nil || !slices.Equal(expired, []string{l.ID}) {
		t.Fatalf("expire: %v %v", expired, err)
	}
	again := lease(t, s, 3)
	if again == nil || !slices.Equal(keys(again.Clips), []string{"b", "c"}) {
		t.Fatalf("re-lease after expiry: %+v, want b and c", again)
	}
	// A late result of the old lease is stored and leaves the new lease alone.
	if stored, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: "b", Researcher: "late"}); err != nil || !stored {
		t.Fatal(stored, err)
	}
	if ok, err := s.Extend(ctx, again.ID, time.Minute); err != nil || !ok {
		t.Errorf("the new lease is no longer active: %v %v", ok, err)
	}
	// A duplicate of that result changes nothing.
	if stored, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: again.ID, Episode: "ep", Clip: "b", Researcher: "new"}); err != nil || stored {
		t.Errorf("duplicate stored: %v %v", stored, err)
	}
}

func TestUnknownPairIsAnError(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	_, err := s.StoreResult(context.Background(), &events.ResearchCompleted{LeaseID: "00000000-0000-0000-0000-000000000001", Episode: "nope", Clip: "nada", Researcher: "r"})
	if err == nil {
		t.Error("result for an unknown pair stored")
	}
}

// TestConcurrentLeasesNeverOverlap: eight leasers race over 10 episodes × 20
// clips; no (episode, clip) is leased twice and all are leased.
func TestConcurrentLeasesNeverOverlap(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	for i := range 10 {
		add(t, s, work("episode", fmt.Sprintf("e%02d", i), int32(i%3), i))
	}
	for i := range 20 {
		add(t, s, work("clip", fmt.Sprintf("c%02d", i), int32(i%4), i))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := s.Lease(context.Background(), 3, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if l == nil {
					return
				}
				mu.Lock()
				for _, c := range l.Clips {
					seen[l.Episode.Key+"/"+c.Key]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Errorf("%d pairs leased, want 200", len(seen))
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s leased %d times", p, n)
		}
	}
}

func TestClipActivityAdjustsEpisodes(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	ctx := context.Background()
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	gone := work("clip", "a", 1, 1)
	gone.State, gone.Version = events.WorkRedirect, day.Add(time.Hour)
	add(t, s, gone)
	if l := lease(t, s, 5); l != nil {
		t.Fatalf("leased a redirected clip: %+v", l)
	}
	back := work("clip", "a", 1, 1)
	back.Version = day.Add(2 * time.Hour)
	add(t, s, back)
	stale := work("clip", "a", 1, 1)
	if out, _, _ := s.ApplyWork(ctx, stale); out != research.Stale {
		t.Errorf("older version: %s", out)
	}
	if l := lease(t, s, 5); l == nil || !slices.Equal(keys(l.Clips), []string{"a"}) {
		t.Fatalf("reactivated clip not leased: %+v", l)
	}
}

// TestConcurrentWorksKeepCountersRight: episodes and clips arriving at once
// from several handlers: every episode ends up counting every clip open.
func TestConcurrentWorksKeepCountersRight(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	var works []*events.WorkUpserted
	for i := range 40 {
		works = append(works, work("episode", fmt.Sprintf("e%02d", i), 1, i), work("clip", fmt.Sprintf("c%02d", i), 1, i))
	}
	ch := make(chan *events.WorkUpserted)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range ch {
				if _, _, err := s.ApplyWork(context.Background(), w); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for _, w := range works {
		ch <- w
	}
	close(ch)
	wg.Wait()
	var wrong int
	if err := s.DB().QueryRow(context.Background(), `SELECT count(*) FROM research.episodes WHERE open_clips <> 40`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Errorf("%d of 40 episodes miscount their open clips", wrong)
	}
}

// TestNewInactiveClipLeavesCountersAlone: a clip key the pwa has never seen
// that arrives inactive (a redirect or gone key from the merger) changes no
// episode's count of open clips (it took one off every active episode).
func TestNewInactiveClipLeavesCountersAlone(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	gone := work("clip", "never-seen", 1, 1)
	gone.State = events.WorkRedirect
	add(t, s, gone)
	var open int
	if err := db.QueryRow(context.Background(), `SELECT open_clips FROM research.episodes WHERE key = 'ep'`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 1 {
		t.Errorf("open_clips %d after a new inactive clip, want 1", open)
	}
}

// TestParkedEpisodeIsNotLeasedUntilItsMediaChanges: a parked episode is
// left out of leasing; a new version with the same media keeps it parked,
// one with other media releases it.
func TestParkedEpisodeIsNotLeasedUntilItsMediaChanges(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	ctx := context.Background()
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1))
	if _, ok, err := s.EpisodeFailure(ctx, "", "ep", "audio of ep: blob not found", ""); !ok || err != nil {
		t.Fatalf("park: %v %v", ok, err)
	}
	if l := lease(t, s, 5); l != nil {
		t.Fatalf("leased a parked episode: %+v", l)
	}
	same := work("episode", "ep", 1, 1)
	same.Version, same.Title = day.Add(time.Hour), "retitled"
	add(t, s, same)
	if l := lease(t, s, 5); l != nil {
		t.Fatalf("a new title released the parked episode: %+v", l)
	}
	fixed := work("episode", "ep", 1, 1)
	fixed.Version, fixed.Media.Key = day.Add(2*time.Hour), "audio/ep-fixed"
	add(t, s, fixed)
	if l := lease(t, s, 5); l == nil || l.Episode.Media.Key != "audio/ep-fixed" {
		t.Fatalf("new media did not release the episode: %+v", l)
	}
	if known, _, _ := s.EpisodeFailure(ctx, "", "nope", "x", ""); known {
		t.Error("parked an unknown episode")
	}
}

// TestMediaChangeInvalidatesResults: results were first-wins, so fixing a
// work's media never replaced results computed from the wrong audio. Now a
// change of an episode's media forgets all its results, a change of a
// clip's media forgets that clip's results in every episode; both are
// leased again, and a result of a lease made before the change is refused
// as stale while one of a newer lease is stored.
func TestMediaChangeInvalidatesResults(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	ctx := context.Background()
	add(t, s, work("episode", "e1", 2, 1), work("episode", "e2", 1, 1), work("clip", "a", 1, 1), work("clip", "b", 1, 1))
	store := func(l *research.Lease, clip string) error {
		_, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: l.ID, Episode: l.Episode.Key, Clip: clip, Researcher: "r",
			Occurrences: []events.Occurrence{{OffsetMS: 1, DurationMS: 1, Confidence: 1}}})
		return err
	}
	for range 2 {
		l := lease(t, s, 5)
		for _, c := range l.Clips {
			if err := store(l, c.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(q string) int {
		var n int
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM research.results`); n != 4 {
		t.Fatalf("%d results, want 4", n)
	}
	// A lease in flight on e2 when e2's media is fixed: its result is stale.
	old := work("episode", "e2", 1, 1)
	old.Version = day.Add(time.Minute)
	add(t, s, old) // a replay with the same media: nothing forgotten
	if n := count(`SELECT count(*) FROM research.results`); n != 4 {
		t.Fatalf("an update without a media change forgot results: %d left", n)
	}
	bClip := work("clip", "b", 1, 1)
	bClip.Version, bClip.Media.SHA256 = day.Add(time.Hour), "ab12"
	add(t, s, bClip)
	if n := count(`SELECT count(*) FROM research.results r JOIN research.clips c ON c.id = r.clip_id WHERE c.key = 'b'`); n != 0 {
		t.Errorf("clip b's media changed; %d of its results kept", n)
	}
	if n := count(`SELECT sum(open_clips) FROM research.episodes`); n != 2 {
		t.Errorf("open clips %d after clip b changed, want 2 (b in each episode)", n)
	}
	l := lease(t, s, 5) // e1 first (priority), clip b only
	if l == nil || l.Episode.Key != "e1" || len(l.Clips) != 1 || l.Clips[0].Key != "b" {
		t.Fatalf("lease after clip b changed: %+v", l)
	}
	fixed := work("episode", "e1", 2, 1)
	fixed.Version, fixed.Media.Key = day.Add(2*time.Hour), "audio/e1-fixed"
	add(t, s, fixed)
	if n := count(`SELECT count(*) FROM research.results r JOIN research.episodes e ON e.id = r.episode_id WHERE e.key = 'e1'`); n != 0 {
		t.Errorf("episode e1's media changed; %d of its results kept", n)
	}
	if n := count(`SELECT open_clips FROM research.episodes WHERE key = 'e1'`); n != 2 {
		t.Errorf("e1 has %d open clips after its media changed, want 2", n)
	}
	if err := store(l, "b"); !errors.Is(err, research.ErrStaleResult) {
		t.Errorf("a result of a lease made before the media changed: %v, want ErrStaleResult", err)
	}
	if n := count(`SELECT count(*) FROM research.results r JOIN research.episodes e ON e.id = r.episode_id WHERE e.key = 'e1'`); n != 0 {
		t.Errorf("the stale result was stored")
	}
	fresh := lease(t, s, 5)
	if fresh == nil || fresh.Episode.Key != "e1" || fresh.Episode.Media.Key != "audio/e1-fixed" || len(fresh.Clips) != 2 {
		t.Fatalf("lease after e1 changed: %+v", fresh)
	}
	for _, c := range fresh.Clips {
		if err := store(fresh, c.Key); err != nil {
			t.Errorf("a result of the new lease: %v", err)
		}
	}
	if n := count(`SELECT researched_clips FROM research.episodes WHERE key = 'e1'`); n != 2 {
		t.Errorf("e1 researched_clips %d, want 2", n)
	}
}

// TestResearchCarriesOverWhenWorksMerge: an episode or clip merged into
// another work (a redirect) took its results with it to nowhere, and the
// work was researched again from the same audio. Results now carry over to
// the work it is merged into when both have the same media, whichever of
// the redirect and the work arrives last; not when the media differs.
func TestResearchCarriesOverWhenWorksMerge(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	ctx := context.Background()
	count := func(q string, args ...any) int {
		var n int
		if err := db.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	results := func(episode string) int {
		return count(`SELECT count(*) FROM research.results r JOIN research.episodes e ON e.id = r.episode_id WHERE e.key = $1`, episode)
	}
	media := func(w *events.WorkUpserted, key string) *events.WorkUpserted { w.Media.Key = "audio/" + key; return w }
	add(t, s, work("clip", "a", 1, 1), work("clip", "b", 1, 1), work("episode", "src", 1, 1))
	l := lease(t, s, 5)
	for _, c := range l.Clips {
		if _, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: l.ID, Episode: "src", Clip: c.Key, Researcher: "r",
			Occurrences: []events.Occurrence{}}); err != nil {
			t.Fatal(err)
		}
	}
	// The redirect first, then the work it points to (same media), which
	// names its members.
	redirect := work("episode", "src", 1, 1)
	redirect.Version, redirect.State, redirect.RedirectTo, redirect.Media = day.Add(time.Hour), events.WorkRedirect, "dst", events.Media{}
	add(t, s, redirect)
	dst := media(work("episode", "dst", 1, 1), "src")
	dst.Version, dst.Members = day.Add(time.Hour), []string{"dst", "src"}
	add(t, s, dst)
	if n := results("dst"); n != 2 {
		t.Errorf("the merged work has %d results, want the 2 carried over", n)
	}
	if n := count(`SELECT open_clips FROM research.episodes WHERE key = 'dst'`); n != 0 {
		t.Errorf("the merged work has %d open clips, want 0", n)
	}
	if l := lease(t, s, 5); l != nil {
		t.Errorf("leased %+v: the carried-over research is done again", l)
	}
	// A clip merged into another with the same media: its results carry
	// over, in every episode; the work first, then the redirect.
	newClip := media(work("clip", "a2", 1, 1), "a")
	add(t, s, newClip)
	clipRedirect := work("clip", "a", 1, 1)
	clipRedirect.Version, clipRedirect.State, clipRedirect.RedirectTo = day.Add(time.Hour), events.WorkRedirect, "a2"
	add(t, s, clipRedirect)
	if n := count(`SELECT count(*) FROM research.results r JOIN research.clips c ON c.id = r.clip_id WHERE c.key = 'a2'`); n != 2 {
		t.Errorf("the merged clip has %d results, want 2 (src's and dst's)", n)
	}
	// Different media: nothing carries over.
	add(t, s, work("episode", "other", 1, 1))
	lo := lease(t, s, 5)
	for lo != nil {
		for _, c := range lo.Clips {
			s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: lo.ID, Episode: lo.Episode.Key, Clip: c.Key, Researcher: "r", Occurrences: []events.Occurrence{}})
		}
		lo = lease(t, s, 5)
	}
	diff := media(work("episode", "third", 1, 1), "something-else")
	diff.Members = []string{"other", "third"}
	otherRedirect := work("episode", "other", 1, 1)
	otherRedirect.Version, otherRedirect.State, otherRedirect.RedirectTo = day.Add(time.Hour), events.WorkRedirect, "third"
	add(t, s, otherRedirect, diff)
	if n := results("third"); n != 0 {
		t.Errorf("%d results carried over to a work of other media", n)
	}
}

// TestRedoForgetsFailedOrAllClips: an operator's retry forgets an episode's
// failed clips (and unparks it), a redo all of them; the clips are leased
// again; an unknown episode is reported.
func TestRedoForgetsFailedOrAllClips(t *testing.T) {
	s := research.New(testenv.DB(t, migrations.Schema))
	ctx := context.Background()
	add(t, s, work("episode", "ep", 1, 1), work("clip", "a", 1, 1), work("clip", "b", 1, 1))
	l := lease(t, s, 5)
	for _, c := range l.Clips {
		r := &events.ResearchCompleted{LeaseID: l.ID, Episode: "ep", Clip: c.Key, Researcher: "r", Occurrences: []events.Occurrence{}}
		if c.Key == "b" {
			r.Failure = "corrupt audio"
		}
		if _, err := s.StoreResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if l := lease(t, s, 5); l != nil {
		t.Fatalf("leased %+v before any retry", l)
	}
	n, known, err := s.Redo(ctx, "ep", true)
	if err != nil || !known || n != 1 {
		t.Fatalf("retry: %d %v %v, want the failed clip forgotten", n, known, err)
	}
	if l := lease(t, s, 5); l == nil || len(l.Clips) != 1 || l.Clips[0].Key != "b" {
		t.Fatalf("after the retry leased %+v, want clip b alone", l)
	}
	n, _, err = s.Redo(ctx, "ep", false)
	if err != nil || n != 1 {
		t.Fatalf("redo: %d %v, want a's result forgotten (b's is leased)", n, err)
	}
	if _, known, _ := s.Redo(ctx, "nope", false); known {
		t.Error("redo of an unknown episode reported it known")
	}
}

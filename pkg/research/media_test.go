package research_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
)

// TestMovedMediaKeepsItsResearch: a merge that changed only the media's
// key (the same sha256: a file moved) deleted every result of the work
// before any new research existed, and the episode was researched again
// from the same audio. Its results now stand; a change of the bytes (a
// new sha256) still forgets them.
func TestMovedMediaKeepsItsResearch(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	ctx := context.Background()
	ep, clip := work("episode", "e", 1, 1), work("clip", "c", 1, 1)
	ep.Media.SHA256, clip.Media.SHA256 = "aa", "cc"
	add(t, s, ep, clip)
	l := lease(t, s, 5)
	if _, err := s.StoreResult(ctx, &events.ResearchCompleted{LeaseID: l.ID, Episode: "e", Clip: "c", Researcher: "r",
		Occurrences: []events.Occurrence{{OffsetMS: 1, DurationMS: 1, Confidence: 1}}}); err != nil {
		t.Fatal(err)
	}
	results := func() (n, open int) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM research.results), (SELECT open_clips FROM research.episodes WHERE key = 'e')`).Scan(&n, &open); err != nil {
			t.Fatal(err)
		}
		return n, open
	}
	moved := work("episode", "e", 1, 1)
	moved.Version, moved.Media = day.Add(time.Hour), events.Media{Key: "moved/e.wav", SHA256: "aa"}
	movedClip := work("clip", "c", 1, 1)
	movedClip.Version, movedClip.Media = day.Add(time.Hour), events.Media{Key: "moved/c.wav", SHA256: "cc"}
	add(t, s, moved, movedClip)
	if n, open := results(); n != 1 || open != 0 {
		t.Fatalf("after the media moved (same sha256): %d results, %d open clips; want the result kept, nothing to research", n, open)
	}
	changed := work("episode", "e", 1, 1)
	changed.Version, changed.Media = day.Add(2*time.Hour), events.Media{Key: "moved/e.wav", SHA256: "bb"}
	add(t, s, changed)
	if n, open := results(); n != 0 || open != 1 {
		t.Fatalf("after the bytes changed: %d results, %d open clips; want them forgotten, the clip open again", n, open)
	}
	if !research.MediaChanged(events.Media{Key: "a", SHA256: ""}, events.Media{Key: "b", SHA256: "x"}) ||
		research.MediaChanged(events.Media{Key: "a", SHA256: "x"}, events.Media{Key: "b", SHA256: "x"}) {
		t.Error("MediaChanged: a new key without a known sha256 is a change; a new key with the same sha256 is not")
	}
}

// TestLeaseDuringAMediaChangeGetsTheNewMedia: a lease made while a change
// of a clip's media was in flight read the clip's old media, and its pair
// escaped the change's forgetting (uncommitted when the change deleted
// pairs). A lease now waits for the change and hands out the new media.
func TestLeaseDuringAMediaChangeGetsTheNewMedia(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	ctx := context.Background()
	add(t, s, work("episode", "e", 1, 1), work("clip", "c", 1, 1))
	// A change of works in flight: it holds the works lock and has
	// written the clip's new media, not yet committed (as UpsertWork does).
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('archivist.research.works'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE research.clips SET media_key = 'audio/c-new', media_changed_at = clock_timestamp() WHERE key = 'c'`); err != nil {
		t.Fatal(err)
	}
	got := make(chan *research.Lease, 1)
	go func() {
		l, err := s.Lease(ctx, 5, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case l := <-got:
		t.Fatalf("a lease was made during the change: %+v", l)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil || len(l.Clips) != 1 || l.Clips[0].Media.Key != "audio/c-new" {
		t.Fatalf("lease after the change: %+v, want clip c with its new media", l)
	}
}

// TestRetiredMedia: a work's old sha256 is retired when its media changes
// to other bytes or the work is gone, once no active work names it: not
// while another episode or clip still does, not when only the key moved,
// not for a replay, and not for a work merged into another (its research
// carries over).
func TestRetiredMedia(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	ctx := context.Background()
	at := 0
	apply := func(kind, key, sha, state string) *events.MediaRetired {
		t.Helper()
		at++
		w := work(kind, key, 1, 1)
		w.Version, w.Media, w.State = day.Add(time.Duration(at)*time.Hour), events.Media{Key: key + ".wav", SHA256: sha}, state
		if state == events.WorkRedirect {
			w.RedirectTo = "elsewhere"
		}
		out, retired, err := s.ApplyWork(ctx, w)
		if err != nil || out != research.Applied {
			t.Fatalf("%s %s: %v %v", kind, key, out, err)
		}
		return retired
	}
	sha := func(c byte) string { return strings.Repeat(string(c), 64) }
	want := func(what string, got *events.MediaRetired, sha, reason string) {
		t.Helper()
		if sha == "" && got != nil || sha != "" && (got == nil || got.SHA256 != sha || got.Reason != reason) {
			t.Errorf("%s: retired %+v, want %q (%s)", what, got, sha, reason)
		}
	}
	want("a new episode", apply("episode", "e1", sha('a'), events.WorkMerged), "", "")
	want("a clip of the same audio", apply("clip", "c1", sha('a'), events.WorkMerged), "", "")
	want("the episode's media changes, the clip still names it", apply("episode", "e1", sha('b'), events.WorkMerged), "", "")
	want("the clip's media changes too", apply("clip", "c1", sha('c'), events.WorkMerged), sha('a'), events.RetiredMediaChanged)
	want("the episode's key moves, same bytes", apply("episode", "e1", sha('b'), events.WorkMerged), "", "")
	want("the episode is gone", apply("episode", "e1", sha('b'), events.WorkGone), sha('b'), events.RetiredGone)
	want("a gone work again", apply("episode", "e1", sha('b'), events.WorkGone), "", "")
	want("a clip merged into another", apply("clip", "c1", sha('c'), events.WorkRedirect), "", "")
	// A replay of the last version retires nothing.
	w := work("clip", "c1", 1, 1)
	w.Version, w.Media, w.State, w.RedirectTo = day.Add(time.Duration(at)*time.Hour), events.Media{Key: "c1.wav", SHA256: sha('c')}, events.WorkRedirect, "elsewhere"
	if out, retired, err := s.ApplyWork(ctx, w); err != nil || out != research.Replay || retired != nil {
		t.Errorf("a replay: %v %+v %v", out, retired, err)
	}
}

// TestPrintsOfUnusedAudioAreRetired: a lease notes the use of its
// episode's and clips' audio; audio no lease has named for the retention
// has its prints retired once (a page at a time), and a lease naming it
// again keeps them again; a failed publish retires what went before it
// and leaves the rest for the next call.
func TestPrintsOfUnusedAudioAreRetired(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	ctx := context.Background()
	sha := func(c byte) string { return strings.Repeat(string(c), 64) }
	ep, c1, c2 := work("episode", "e", 1, 1), work("clip", "c1", 1, 1), work("clip", "c2", 1, 1)
	ep.Media.SHA256, c1.Media.SHA256, c2.Media.SHA256 = sha('a'), sha('b'), sha('c')
	add(t, s, ep, c1, c2)
	lease(t, s, 5)
	var published []*events.MediaRetired
	publish := func(_ context.Context, r *events.MediaRetired) error {
		if err := r.Validate(); err != nil {
			t.Errorf("a retirement that fails validation: %v", err)
		}
		published = append(published, r)
		return nil
	}
	const retention = 90 * 24 * time.Hour
	if n, err := s.RetireUnusedPrints(ctx, retention, 10, publish); err != nil || n != 0 {
		t.Fatalf("just leased: %d retired (%v), want none", n, err)
	}
	// 100 days pass for the episode's audio and one clip's.
	if _, err := db.Exec(ctx, `UPDATE research.media_use SET used_at = now() - interval '100 days' WHERE sha256 IN ($1, $2)`, sha('a'), sha('b')); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RetireUnusedPrints(ctx, retention, 1, publish); err != nil || n != 1 {
		t.Fatalf("a page of one: %d retired (%v)", n, err)
	}
	if n, err := s.RetireUnusedPrints(ctx, retention, 10, publish); err != nil || n != 1 {
		t.Fatalf("the next page: %d retired (%v)", n, err)
	}
	if n, err := s.RetireUnusedPrints(ctx, retention, 10, publish); err != nil || n != 0 {
		t.Fatalf("again: %d retired (%v), want none (each once)", n, err)
	}
	got := map[string]string{}
	for _, r := range published {
		got[r.SHA256] = r.Work + " " + r.Reason
	}
	if len(published) != 2 || got[sha('a')] != "e unused" || got[sha('b')] != "c1 unused" {
		t.Errorf("published %v, want the episode's and c1's audio, unused, each once", got)
	}
	// A lease naming the episode's audio again keeps its prints again: the
	// retention counts from it.
	var usedAgo, retired any
	add(t, s, work("clip", "c3", 1, 1))
	lease(t, s, 5)
	if err := db.QueryRow(ctx, `SELECT now() - used_at < interval '1 hour', retired_at FROM research.media_use WHERE sha256 = $1`, sha('a')).Scan(&usedAgo, &retired); err != nil {
		t.Fatal(err)
	}
	if usedAgo != true || retired != nil {
		t.Errorf("leased again: used now %v, retired %v; want used now and not retired", usedAgo, retired)
	}
	// A publish that fails: what went before it is marked, the rest waits.
	if _, err := db.Exec(ctx, `UPDATE research.media_use SET used_at = now() - interval '100 days', retired_at = NULL`); err != nil {
		t.Fatal(err)
	}
	calls := 0
	failing := func(_ context.Context, r *events.MediaRetired) error {
		if calls++; calls == 2 {
			return errors.New("NATS down")
		}
		return nil
	}
	if n, err := s.RetireUnusedPrints(ctx, retention, 10, failing); err == nil || n != 1 {
		t.Fatalf("a failed publish: %d retired, %v; want 1 and the error", n, err)
	}
	var left int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM research.media_use WHERE retired_at IS NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 2 {
		t.Errorf("%d left for the next call, want 2", left)
	}
}

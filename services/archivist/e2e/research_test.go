package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/archivist/keycmd"
	"github.com/archivist/archivist/services/archivist/researchcmd"
	"github.com/archivist/archivist/services/cwa/cwa"
	"github.com/archivist/archivist/services/pwa/pwa"
	"github.com/archivist/archivist/services/researcher/artifact"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
	"github.com/archivist/archivist/services/researcher/researcher"
)

func TestMain(m *testing.M) {
	// The server checks a publisher's bcrypt hash at each sign-in: seconds
	// at the production cost under -race, past the client's connect
	// timeout. The cost is the hash's; what is checked is the same.
	keycmd.BcryptCost = bcrypt.MinCost
	testenv.Main(m)
}

// testLocator does no audio analysis (tests only): it reads the episode's
// and each clip's bytes from the blob store and reports, per clip, one
// occurrence derived from the bytes, so results can be checked. Hooks let a
// test slow it down or make it hang.
type testLocator struct {
	delay  time.Duration
	before func(ctx context.Context, clip int) // runs before each clip
}

func (l *testLocator) Locate(ctx context.Context, ep researcher.Audio, clips []researcher.Audio, found func(int, []events.Occurrence, error) error) error {
	epBytes, err := readAll(ctx, ep)
	if err != nil {
		return err
	}
	for i, c := range clips {
		if l.before != nil {
			l.before(ctx, i)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(l.delay):
		}
		b, err := readAll(ctx, c)
		if err != nil {
			return err
		}
		if err := found(i, expected(epBytes, b), nil); err != nil {
			return err
		}
	}
	return nil
}

func readAll(ctx context.Context, a researcher.Audio) ([]byte, error) {
	rc, err := a.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// expected is the result the test locator gives for a pair.
func expected(ep, clip []byte) []events.Occurrence {
	h := sha256.Sum256(append(append([]byte{}, ep...), clip...))
	n := int(h[0] % 3) // zero, one or two occurrences
	occ := []events.Occurrence{}
	for i := range n {
		occ = append(occ, events.Occurrence{OffsetMS: int64(binary.BigEndian.Uint16(h[1+2*i:])), DurationMS: int64(len(clip)), Confidence: 0.9})
	}
	return occ
}

type world struct {
	t        *testing.T
	shared   testenv.Shared
	bus      *bus.Bus
	db       *pgxpool.Pool
	episodes int
	clips    int
	vars     map[string]string
	// audio is the blob of an episode or clip (textAudio unless set).
	audio func(kind string, i int) []byte
}

// textAudio is what the test locator reads: a few bytes per work.
func textAudio(kind string, i int) []byte {
	if kind == events.KindClip {
		return []byte(fmt.Sprintf("clip %d audio", i))
	}
	return []byte(fmt.Sprintf("episode %d audio, longer", i))
}

// newWorld makes episodes × clips merged works with audio in a blob store,
// published on WORKS as the curator would.
func newWorld(t *testing.T, episodes, clips int, vars map[string]string) *world {
	t.Helper()
	w := newWorldAt(t, testenv.NATS(t), nil, episodes, clips, textAudio)
	for k, v := range vars {
		w.vars[k] = v
	}
	return w
}

// newWorldAt is newWorld on the NATS server at url, publishing the works as
// the NATS user in creds (NATS_USER, NATS_PASSWORD) if given.
func newWorldAt(t *testing.T, url string, creds map[string]string, episodes, clips int, audio func(kind string, i int) []byte) *world {
	t.Helper()
	bs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, shared: testenv.Shared{NATSURL: url, DBURL: testenv.DBURL(t, migrations.Schema), Blob: bs},
		episodes: episodes, clips: clips, audio: audio, vars: map[string]string{
			"RESEARCH_LEASE_DURATION": "6s", "RESEARCH_ITEM_TTL": "3s", "RESEARCH_MAX_CLIPS": "8",
			"RESEARCH_LIVENESS_TTL": "2s", "PWA_INTERVAL": "200ms", "PWA_HTTP_ADDR": "127.0.0.1:0",
			"RESEARCH_RETRY_BASE": "200ms", "RESEARCH_RETRY_MAX": "2s",
		}}
	if creds != nil {
		// A service's user may not make streams: the deploy user made them.
		b, err := bus.Connect(context.Background(), bus.Config{URL: url, User: creds["NATS_USER"], Password: creds["NATS_PASSWORD"], Replicas: 1}, "curator")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close(context.Background()) })
		w.bus = b
	} else {
		w.bus = testenv.BusAt(t, w.shared.NATSURL, "curator")
	}
	w.db, err = store.Open(context.Background(), store.Config{URL: w.shared.DBURL, MaxConns: 4}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.db.Close)
	ctx := context.Background()
	var batch []bus.Outgoing
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	add := func(kind, key string, body []byte, prio int) {
		if _, err := bs.Put(ctx, "audio/"+key, bytes.NewReader(body), nil); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		wk := &events.WorkUpserted{Kind: kind, Key: key, Version: at, State: events.WorkMerged, Title: key,
			Media: events.Media{Key: "audio/" + key, SHA256: hex.EncodeToString(sum[:])}, Priority: int32(prio), InitialCuratedAt: at, LatestCuratedAt: at}
		env, err := events.NewAt("curator", at, wk)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, bus.Outgoing{Subject: events.WorkSubject(kind, key), Envelope: env})
	}
	for i := range clips {
		add(events.KindClip, fmt.Sprintf("clip:%03d", i), audio(events.KindClip, i), i%5)
	}
	for i := range episodes {
		add(events.KindEpisode, fmt.Sprintf("ep:%03d", i), audio(events.KindEpisode, i), i%3)
	}
	if err := w.bus.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) start(def func() any, extra map[string]string) *testenv.Service {
	w.t.Helper()
	vars := map[string]string{}
	for k, v := range w.vars {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	switch d := def().(type) {
	case string:
		switch d {
		case "pwa":
			return testenv.StartServiceIn(w.t, pwa.Definition(), w.shared, vars)
		case "cwa":
			return testenv.StartServiceIn(w.t, cwa.Definition(), w.shared, vars)
		}
	case researcher.ClipLocator:
		if _, ok := vars["RESEARCHER_CACHE_DIR"]; !ok {
			vars["RESEARCHER_CACHE_DIR"] = w.t.TempDir() // not the user's own
		}
		if _, ok := vars["RESEARCHER_PRINTS_KEY"]; !ok {
			vars["RESEARCHER_PRINTS_KEY"] = "the test world's prints key" // prints shared, as a cluster's
		}
		return testenv.StartServiceIn(w.t, researcher.Definition(d), w.shared, vars)
	}
	w.t.Fatalf("unknown service")
	return nil
}

func named(s string) func() any                   { return func() any { return s } }
func locator(l researcher.ClipLocator) func() any { return func() any { return l } }

// waitResults waits until every pair has a result, then checks that each
// was stored once, with the result the test locator gives.
func (w *world) waitResults(timeout time.Duration) {
	w.t.Helper()
	w.waitStored(timeout)
	for ep, byClip := range w.results() {
		for clip, occ := range byClip {
			var ei, ci int
			fmt.Sscanf(ep, "ep:%d", &ei)
			fmt.Sscanf(clip, "clip:%d", &ci)
			want := expected(w.audio(events.KindEpisode, ei), w.audio(events.KindClip, ci))
			if !reflect.DeepEqual(occ, want) {
				w.t.Errorf("%s/%s: occurrences %v, want %v", ep, clip, occ, want)
			}
		}
	}
}

// waitStored waits until every pair has a result, and checks each was
// stored once and the counters agree.
func (w *world) waitStored(timeout time.Duration) {
	w.t.Helper()
	want := w.episodes * w.clips
	deadline := time.Now().Add(timeout)
	var n int
	for {
		if err := w.db.QueryRow(context.Background(), "SELECT count(*) FROM research.results").Scan(&n); err != nil {
			w.t.Fatal(err)
		}
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != want {
		w.t.Fatalf("%d of %d pairs researched after %s", n, want, timeout)
	}
	var distinct, complete int
	w.db.QueryRow(context.Background(), "SELECT count(DISTINCT (episode_id, clip_id)) FROM research.results").Scan(&distinct)
	if distinct != want {
		w.t.Errorf("%d distinct pairs among %d results", distinct, n)
	}
	w.db.QueryRow(context.Background(), `SELECT count(*) FROM research.episodes WHERE researched_clips = $1 AND open_clips = 0`, w.clips).Scan(&complete)
	if complete != w.episodes {
		rows, _ := w.db.Query(context.Background(), `SELECT key, researched_clips, open_clips FROM research.episodes WHERE NOT (researched_clips = $1 AND open_clips = 0)`, w.clips)
		for rows.Next() {
			var k string
			var r, o int
			rows.Scan(&k, &r, &o)
			w.t.Logf("episode %s: researched_clips %d, open_clips %d", k, r, o)
		}
		rows.Close()
		w.t.Errorf("%d of %d episodes complete by their counters", complete, w.episodes)
	}
}

// results are the stored occurrences by episode and clip key.
func (w *world) results() map[string]map[string][]events.Occurrence {
	w.t.Helper()
	rows, err := w.db.Query(context.Background(), `SELECT e.key, c.key, r.occurrences FROM research.results r
		JOIN research.episodes e ON e.id = r.episode_id JOIN research.clips c ON c.id = r.clip_id`)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string][]events.Occurrence{}
	for rows.Next() {
		var ep, clip string
		var occ []events.Occurrence
		if err := rows.Scan(&ep, &clip, &occ); err != nil {
			w.t.Fatal(err)
		}
		if out[ep] == nil {
			out[ep] = map[string][]events.Occurrence{}
		}
		out[ep][clip] = occ
	}
	return out
}

// leaseStates counts the leases by state.
func (w *world) leaseStates() map[string]int {
	w.t.Helper()
	out := map[string]int{}
	rows, err := w.db.Query(context.Background(), "SELECT state, count(*) FROM research.leases GROUP BY state")
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int
		rows.Scan(&s, &n)
		out[s] = n
	}
	return out
}

// doubleLeased counts pairs held by two leases at once. (A pair may be
// leased again after its lease ended: a final result handled by one cwa
// replica before another has stored an earlier result of the same item frees
// that pair; it is researched again and stored once, as the spec allows.)
func (w *world) doubleLeased() int {
	var n int
	if err := w.db.QueryRow(context.Background(), `SELECT count(*) FROM research.leases a JOIN research.leases b
		ON a.episode_id = b.episode_id AND a.id < b.id AND a.clip_ids && b.clip_ids
		AND tstzrange(a.created_at, coalesce(a.ended_at, 'infinity')) && tstzrange(b.created_at, coalesce(b.ended_at, 'infinity'))`).Scan(&n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// TestResearchEndToEnd: 20 episodes × 30 clips, 3 researchers, max-clips 8,
// two cwa and two pwa replicas: every pair researched, each stored once,
// every lease ended by its final result, and no pair leased twice.
func TestResearchEndToEnd(t *testing.T) {
	w := newWorld(t, 20, 30, map[string]string{"RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s"})
	w.start(named("cwa"), nil)
	w.start(named("cwa"), nil)
	for i := range 3 {
		w.start(locator(&testLocator{delay: time.Millisecond}), map[string]string{"RESEARCHER_ID": fmt.Sprintf("r%d", i)})
	}
	pwaAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	w.start(named("pwa"), map[string]string{"PWA_HTTP_ADDR": pwaAddr})
	w.start(named("pwa"), nil) // two replicas race for the same work
	w.waitResults(90 * time.Second)
	if n := w.doubleLeased(); n != 0 {
		t.Errorf("%d pairs leased twice", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.leaseStates()["active"] > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	states := w.leaseStates()
	if states["active"] != 0 || states["expired"] != 0 || states["revoked"] < 20*30/8 {
		t.Errorf("lease states %v: want every lease revoked by its final result", states)
	}
	t.Logf("lease states %v", states)

	// What `archivist research status` shows.
	st, err := researchcmd.Fetch(context.Background(), "http://"+pwaAddr)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := researchcmd.Print(&out, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if st.Episodes.Complete != 20 || st.Episodes.InProgress != 0 || st.Episodes.Waiting != 0 ||
		st.Results != 600 || st.Clips != 30 || st.Researchers != 3 || len(st.Leases) != 0 {
		t.Errorf("status %+v", st)
	}
	if !strings.Contains(out.String(), "complete 20") {
		t.Errorf("printed status:\n%s", out.String())
	}
}

// TestResearcherCrashMidItem: one researcher dies (its connection drops
// and it never sends a final result) after two results. Its lease expires,
// the unfinished clips are leased again, and nothing is stored twice.
func TestResearcherCrashMidItem(t *testing.T) {
	w := newWorld(t, 3, 10, nil)
	w.start(named("cwa"), nil)
	var crashed atomic.Bool
	var victim *testenv.Service
	var once sync.Once
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	crashing := &testLocator{}
	crashing.before = func(ctx context.Context, clip int) {
		if clip == 2 {
			once.Do(func() {
				crashed.Store(true)
				go victim.Stop() // withdraws nothing useful: see below
			})
			<-hang
		}
	}
	victim = w.start(locator(crashing), map[string]string{"RESEARCHER_ID": "victim"})
	w.start(named("pwa"), nil)
	deadline := time.Now().Add(20 * time.Second)
	for !crashed.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !crashed.Load() {
		t.Fatal("the victim never took work")
	}
	w.start(locator(&testLocator{}), map[string]string{"RESEARCHER_ID": "survivor"})
	w.waitResults(60 * time.Second)
	if st := w.leaseStates(); st["expired"] == 0 {
		t.Errorf("lease states %v: the victim's lease should have expired", st)
	}
}

// TestCWAStoppedMidStream: the only cwa stops while results are flowing; a
// new one takes over from the queue and nothing is lost or stored twice.
func TestCWAStoppedMidStream(t *testing.T) {
	w := newWorld(t, 4, 20, map[string]string{"RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s"})
	first := w.start(named("cwa"), nil)
	for i := range 2 {
		w.start(locator(&testLocator{delay: 5 * time.Millisecond}), map[string]string{"RESEARCHER_ID": fmt.Sprintf("r%d", i)})
	}
	w.start(named("pwa"), nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		w.db.QueryRow(context.Background(), "SELECT count(*) FROM research.results").Scan(&n)
		if n >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no results flowing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.Stop()
	time.Sleep(300 * time.Millisecond) // results pile up in the queue meanwhile
	w.start(named("cwa"), nil)
	w.waitResults(60 * time.Second)
}

// TestFinalResultLost: the final result of every item is lost on the way to
// the cwa. The leases are never revoked, so they expire, and the clips whose
// results were lost with them are leased and researched again.
func TestFinalResultLost(t *testing.T) {
	w := newWorld(t, 2, 6, map[string]string{"RESEARCH_MAX_CLIPS": "3"})
	ctx := context.Background()
	lost := 0
	st, err := w.bus.JetStream().Stream(ctx, events.StreamResearchResults)
	if err != nil {
		t.Fatal(err)
	}
	w.start(locator(&testLocator{}), map[string]string{"RESEARCHER_ID": "r0"})
	w.start(named("pwa"), nil)
	// No cwa runs yet, so results wait in the queue: the test deletes the
	// final ones there, as a lossy bus would.
	deadline := time.Now().Add(30 * time.Second)
	for lost < 4 && time.Now().Before(deadline) {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			if strings.HasSuffix(m.Header.Get(events.HeaderMsgID), ":final") && lost < 4 {
				if err := st.DeleteMsg(ctx, seq); err == nil {
					lost++
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lost < 4 {
		t.Fatalf("only %d final results seen", lost)
	}
	w.start(named("cwa"), nil)
	w.waitResults(60 * time.Second)
	if st := w.leaseStates(); st["expired"] < 4 {
		t.Errorf("lease states %v: the four leases whose finals were lost should have expired", st)
	}
}

// TestResearcherStopsCleanlyMidItem: a researcher told to stop mid-item
// flags its last sent result final, so the cwa revokes the lease at once
// (nothing waits for it to expire) and the remaining clips go to another
// researcher.
func TestResearcherStopsCleanlyMidItem(t *testing.T) {
	w := newWorld(t, 1, 8, map[string]string{"RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s"})
	w.start(named("cwa"), nil)
	var stopOnce sync.Once
	var leaving *testenv.Service
	slow := &testLocator{}
	slow.before = func(ctx context.Context, clip int) {
		if clip == 3 {
			stopOnce.Do(func() { go leaving.Stop() })
			<-ctx.Done() // the stop cancels the work in hand
		}
	}
	leaving = w.start(locator(slow), map[string]string{"RESEARCHER_ID": "leaving"})
	w.start(named("pwa"), nil)
	deadline := time.Now().Add(20 * time.Second)
	for w.leaseStates()["revoked"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the stopped researcher's lease was never revoked: %v", w.leaseStates())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var stored int
	w.db.QueryRow(context.Background(), "SELECT count(*) FROM research.results").Scan(&stored)
	if stored != 3 {
		t.Errorf("%d results stored by the leaving researcher, want the 3 it finished", stored)
	}
	w.start(locator(&testLocator{}), map[string]string{"RESEARCHER_ID": "staying"})
	w.waitResults(30 * time.Second)
	if st := w.leaseStates(); st["expired"] != 0 {
		t.Errorf("lease states %v: nothing should have had to expire", st)
	}
}

// TestResearchWithTheFingerprintLocator runs the assignment with the
// shipped researcher (the fingerprint locator) on synthesised audio: each
// clip's stored occurrences are where it was mixed into each episode, to
// 10 ms, and a clip mixed nowhere in an episode has an empty result that
// says why (its miss).
func TestResearchWithTheFingerprintLocator(t *testing.T) {
	const rate = 22050
	clip := func(i int) []float32 { return locatetest.Jingle(uint64(40+i), 3+float64(i), rate) }
	// Where each clip is in each episode, in seconds.
	placed := map[int]map[int][]float64{
		0: {0: {2}, 2: {20}},
		1: {1: {5, 25}},
	}
	audio := func(kind string, i int) []byte {
		if kind == events.KindClip {
			return locatetest.WAV(clip(i), rate)
		}
		ep := locatetest.Bed(uint64(70+i), 40, rate)
		for c, at := range placed[i] {
			for _, s := range at {
				locatetest.Insert(ep, clip(c), int(s*rate), 0.7)
			}
		}
		return locatetest.WAV(ep, rate)
	}
	w := newWorldAt(t, testenv.NATS(t), nil, 2, 3, audio)
	w.start(named("cwa"), nil)
	w.start(locator(locate.NewLocator()), nil)
	w.start(named("pwa"), nil)
	w.waitStored(60 * time.Second)
	res := w.results()
	for e := range 2 {
		for c := range 3 {
			occ := res[fmt.Sprintf("ep:%03d", e)][fmt.Sprintf("clip:%03d", c)]
			want := placed[e][c]
			if len(occ) != len(want) {
				t.Errorf("ep %d clip %d: %+v, want offsets %v", e, c, occ, want)
				continue
			}
			for k, s := range want {
				if d := float64(occ[k].OffsetMS)/1000 - s; d < -0.01 || d > 0.01 || occ[k].Confidence < locate.Threshold {
					t.Errorf("ep %d clip %d: %+v, want offsets %v", e, c, occ, want)
				}
			}
		}
	}

	// Each clip found nowhere in an episode says why: its stored result
	// carries the locator's best refused candidates.
	ctx := context.Background()
	var empty, explained int
	if err := w.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE jsonb_array_length(miss->'candidates') > 0
			AND miss->'candidates'->0->>'stage' <> '')
		FROM research.results WHERE jsonb_array_length(occurrences) = 0 AND failure IS NULL`).Scan(&empty, &explained); err != nil {
		t.Fatal(err)
	}
	if empty != 3 || explained != empty {
		t.Errorf("%d results without occurrences, %d of them explained; want 3, all", empty, explained)
	}

	// Each episode and clip was analysed once, its prints kept in the
	// store under its sha256.
	kept := func(body []byte) int {
		sum := sha256.Sum256(body)
		n := 0
		for _, err := range w.shared.Blob.List(ctx, artifact.Prefix+artifact.MediaPrefix(hex.EncodeToString(sum[:]))) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	old := audio(events.KindEpisode, 0)
	deadline := time.Now().Add(30 * time.Second)
	for kept(old) < 2 || kept(audio(events.KindClip, 0)) < 1 { // uploaded in the background
		if time.Now().After(deadline) {
			t.Fatalf("prints kept: episode %d, clip %d; want the episode's print and samples, the clip's print", kept(old), kept(audio(events.KindClip, 0)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The episode's audio changes: its old prints are discarded from the
	// store, and it is researched (and analysed) again.
	changed := locatetest.WAV(locatetest.Bed(99, 40, rate), rate)
	if _, err := w.shared.Blob.Put(ctx, "audio/ep:000-v2", bytes.NewReader(changed), nil); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(changed)
	at := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	env, err := events.NewAt("curator", at, &events.WorkUpserted{Kind: events.KindEpisode, Key: "ep:000", Version: at, State: events.WorkMerged, Title: "ep:000",
		Media: events.Media{Key: "audio/ep:000-v2", SHA256: hex.EncodeToString(sum[:])}, InitialCuratedAt: at, LatestCuratedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.bus.Publish(ctx, events.WorkSubject(events.KindEpisode, "ep:000"), env); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); kept(old) > 0 || kept(changed) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the episode's media changed: %d prints of the old audio kept, %d of the new; want none and two", kept(old), kept(changed))
		}
	}
	if kept(audio(events.KindEpisode, 1)) < 2 {
		t.Error("the other episode's prints were discarded too")
	}
}

// TestSlowResearchKeepsItsLease: a researcher that takes longer on its
// first clip than the whole lease lasts used to see its episode leased a
// second time; the pwa now extends the lease a live researcher announces
// holding, so no lease expires, nothing is leased twice, and no failure
// counts against the episode.
func TestSlowResearchKeepsItsLease(t *testing.T) {
	w := newWorld(t, 1, 2, map[string]string{"RESEARCH_LEASE_DURATION": "3s", "RESEARCH_ITEM_TTL": "2s", "RESEARCH_LIVENESS_TTL": "1s"})
	w.start(named("cwa"), nil)
	w.start(locator(&testLocator{delay: 4 * time.Second}), nil)
	w.start(named("pwa"), nil)
	w.waitResults(60 * time.Second)
	// The final result is stored, then its lease revoked: wait for both.
	waitUntil(t, 10*time.Second, "the leases to end", func() bool { return w.leaseStates()["active"] == 0 })
	// A second item may wait in the queue for the one researcher and run
	// out (the spec's capacity check leases one ahead): that is no one's
	// failure. A lease the researcher was working on never expires.
	var taken, takenExpired int
	w.db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE held_at IS NOT NULL),
		count(*) FILTER (WHERE held_at IS NOT NULL AND state = 'expired') FROM research.leases`).Scan(&taken, &takenExpired)
	if taken == 0 || takenExpired != 0 {
		t.Errorf("%d leases taken by the researcher, %d of them expired: want none expired while its researcher worked (%v)", taken, takenExpired, w.leaseStates())
	}
	var failures int
	w.db.QueryRow(context.Background(), `SELECT failures FROM research.episodes`).Scan(&failures)
	if failures != 0 {
		t.Errorf("%d failures counted against the episode", failures)
	}
}

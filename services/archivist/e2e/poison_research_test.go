package e2e_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestPoisonClipsFailAlone: an item whose clips include a decoder-crashing
// Ogg page, a WAV declaring 65,535 channels, a clip whose audio is not in
// the store yet and one whose stored audio is not the one its sha256 names
// is researched with the shipped locator: the good clip's occurrence is
// stored, each bad clip is parked with its reason (its pair 'failed', never
// leased again), the lease ends, the researcher survives, and nothing is
// dead-lettered. The clip whose audio is missing is not parked: it waits
// (a curating system may describe audio before delivering it), and when
// its audio is stored (archive.object.recorded) it is researched.
func TestPoisonClipsFailAlone(t *testing.T) {
	const rate = 22050
	good := locatetest.Jingle(41, 3, rate)
	oggPage := append([]byte("OggS\x00\x02"), make([]byte, 21)...)
	audio := func(kind string, i int) []byte {
		if kind == events.KindEpisode {
			ep := locatetest.Bed(71, 30, rate)
			locatetest.Insert(ep, good, 5*rate, 0.7)
			return locatetest.WAV(ep, rate)
		}
		switch i {
		case 0:
			return locatetest.WAV(good, rate)
		case 1:
			return oggPage
		case 2:
			return append(locatetest.WAVHeader(65535, 8000, 16, 16), make([]byte, 16)...)
		case 3: // removed below, and stored again later
			return locatetest.WAV(good, rate)
		}
		return []byte("gone")
	}
	w := newWorldAt(t, testenv.NATS(t), nil, 1, 5, audio)
	if err := w.shared.Blob.Delete(context.Background(), "audio/clip:003"); err != nil {
		t.Fatal(err)
	}
	other := locatetest.WAV(locatetest.Jingle(42, 3, rate), rate)
	if _, err := w.shared.Blob.Put(context.Background(), "audio/clip:004", bytes.NewReader(other), nil); err != nil {
		t.Fatal(err)
	}
	w.start(named("cwa"), nil)
	w.start(locator(locate.NewLocator()), nil)
	w.start(named("pwa"), nil)

	type row struct {
		state, failure string
		occ            []events.Occurrence
	}
	got := map[string]row{}
	results := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for len(got) < n && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			rows, err := w.db.Query(context.Background(), `SELECT c.key, p.state, coalesce(r.failure, ''), r.occurrences
			FROM research.results r JOIN research.clips c ON c.id = r.clip_id
			JOIN research.pairs p ON p.episode_id = r.episode_id AND p.clip_id = r.clip_id`)
			if err != nil {
				t.Fatal(err)
			}
			got = map[string]row{}
			for rows.Next() {
				var k string
				var r row
				if err := rows.Scan(&k, &r.state, &r.failure, &r.occ); err != nil {
					t.Fatal(err)
				}
				got[k] = r
			}
			rows.Close()
		}
		if len(got) != n {
			t.Fatalf("%d of %d clips have a result after 60 s: %+v", len(got), n, got)
		}
	}
	results(4)
	if r := got["clip:000"]; r.state != "researched" || len(r.occ) != 1 || r.occ[0].OffsetMS < 4990 || r.occ[0].OffsetMS > 5010 {
		t.Errorf("good clip: %+v, want one occurrence at 5 s", r)
	}
	for clip, want := range map[string]string{
		"clip:001": "corrupt audio",
		"clip:002": "channels 65535 is beyond the limit",
		"clip:004": "sha256 mismatch",
	} {
		r := got[clip]
		if r.state != "failed" || !strings.Contains(r.failure, want) || len(r.occ) != 0 {
			t.Errorf("%s: %+v, want parked with %q", clip, r, want)
		}
	}
	// The clip whose audio is missing waits, with its reason, not parked,
	// and the research status lists it as retrying. (It is leased again
	// between waits, so both are read in one look at a waiting moment.)
	var state, lastError string
	var retrying []research.RetryInfo
	waitUntil(t, 10*time.Second, "the clip whose audio is missing to wait, listed as retrying", func() bool {
		w.db.QueryRow(context.Background(), `SELECT p.state, p.last_error FROM research.pairs p JOIN research.clips c ON c.id = p.clip_id
			WHERE c.key = 'clip:003'`).Scan(&state, &lastError)
		st, _ := research.New(w.db).Status(context.Background())
		retrying = st.Retrying
		clips := 0
		for _, r := range retrying {
			if r.Clip != "" && r.Clip != "clip:003" {
				return false // a parked clip must never be listed as retrying
			}
			if r.Clip == "clip:003" {
				clips++
			}
		}
		return state == "waiting" && clips == 1
	})
	if !strings.Contains(lastError, "not found") {
		t.Errorf("waiting clip's reason %q, want \"not found\"", lastError)
	}
	// Its audio arrives: it is researched at once, not after its wait.
	if _, err := w.shared.Blob.Put(context.Background(), "audio/clip:003", bytes.NewReader(locatetest.WAV(good, rate)), nil); err != nil {
		t.Fatal(err)
	}
	curator := testenv.BusAt(t, w.shared.NATSURL, "curator")
	if _, _, err := curator.PublishEvent(context.Background(), &events.ObjectRecorded{Object: "audio/clip:003",
		SHA256: strings.Repeat("0", 64), Size: 1}); err != nil {
		t.Fatal(err)
	}
	results(5)
	if r := got["clip:003"]; r.state != "researched" || len(r.occ) != 1 {
		t.Errorf("clip whose audio arrived late: %+v, want researched with its occurrence", r)
	}
	waitUntil(t, 10*time.Second, "the leases to end", func() bool { return w.leaseStates()["active"] == 0 })
	before := w.leaseStates()
	time.Sleep(time.Second) // the pwa would lease the failed clips again now if it were going to
	if n := w.leaseStates(); n["active"] != 0 || n["revoked"]+n["expired"] != before["revoked"]+before["expired"] {
		t.Errorf("leases %v, then %v: want none after the last ended", before, n)
	}
	// Each parked clip was leased once. A lease may expire only if it held
	// the waiting clip alone: under load its retry can wait in the queue
	// behind another item past its item's time to live, and expire; that is
	// the design's answer to a slow researcher, not a poison clip's.
	var leasedAgain []string
	rows, err := w.db.Query(context.Background(), `SELECT c.key FROM research.leases l, unnest(l.clip_ids) AS u(clip_id)
		JOIN research.clips c ON c.id = u.clip_id
		WHERE c.key IN ('clip:001', 'clip:002', 'clip:004') GROUP BY c.key HAVING count(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		leasedAgain = append(leasedAgain, k)
	}
	rows.Close()
	var expiredOther int
	w.db.QueryRow(context.Background(), `SELECT count(*) FROM research.leases l
		WHERE l.state = 'expired' AND l.clip_ids <> (SELECT array_agg(id) FROM research.clips WHERE key = 'clip:003')`).Scan(&expiredOther)
	if len(leasedAgain) != 0 || expiredOther != 0 {
		t.Errorf("parked clips leased again: %v; %d expired leases held more than the waiting clip (want none)", leasedAgain, expiredOther)
	}
	var open int
	w.db.QueryRow(context.Background(), `SELECT open_clips FROM research.episodes`).Scan(&open)
	if open != 0 {
		t.Errorf("open_clips %d, want 0", open)
	}
	// The operator sees the episode done with failed clips, not waiting.
	rst, err := research.New(w.db).Status(context.Background())
	if err != nil || rst.Episodes.WithFailedClips != 1 || rst.Episodes.Waiting != 0 || len(rst.FailedClips) != 3 {
		t.Errorf("research status %+v (%v): want 1 episode done with 3 failed clips, none waiting", rst.Episodes, err)
	}
	st, err := w.bus.JetStream().Stream(context.Background(), events.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(context.Background()); info.State.Msgs != 0 {
		t.Errorf("%d dead letters, want none", info.State.Msgs)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}

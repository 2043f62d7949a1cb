package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/cwa/cwa"
)

// TestFinalResultWaitingForItsSiblings: a final result that overtakes its
// sibling waits for it (by planned redelivery) before the lease is revoked;
// the wait is neither a handler failure nor a duplicate result (it was
// logged as the one and counted as the other).
func TestFinalResultWaitingForItsSiblings(t *testing.T) {
	ctx := context.Background()
	url := testenv.DBURL(t, migrations.Schema)
	db, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs := research.New(db)
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for _, w := range []struct{ kind, key string }{{events.KindClip, "clip:a"}, {events.KindClip, "clip:b"}, {events.KindEpisode, "ep:0"}} {
		if _, _, err := rs.ApplyWork(ctx, &events.WorkUpserted{Kind: w.kind, Key: w.key, Version: at, State: events.WorkMerged,
			Media: events.Media{Key: "audio/" + w.key}, InitialCuratedAt: at, LatestCuratedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := rs.Lease(ctx, 2, time.Hour)
	if err != nil || l == nil || len(l.Clips) != 2 {
		t.Fatalf("lease: %+v %v", l, err)
	}
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: url}
	svc := testenv.StartServiceIn(t, cwa.Definition(), sh, map[string]string{"RESEARCH_LEASE_DURATION": "1h", "RESEARCH_ITEM_TTL": "30m"})
	b := testenv.BusAt(t, sh.NATSURL, "researcher")
	send := func(clip string, final bool) {
		res := &events.ResearchCompleted{LeaseID: l.ID, Episode: l.Episode.Key, Clip: clip, Researcher: "r", Occurrences: []events.Occurrence{}}
		if final {
			res.Final, res.Sent = true, 2
		}
		env, _ := events.New("researcher", res)
		if _, err := b.Publish(ctx, events.SubjectResearchCompleted, env); err != nil {
			t.Fatal(err)
		}
	}
	send(l.Clips[1].Key, true) // the final result first
	time.Sleep(300 * time.Millisecond)
	var state string
	db.QueryRow(ctx, `SELECT state FROM research.leases WHERE id = $1`, l.ID).Scan(&state)
	if state != "active" {
		t.Fatalf("lease %s before the sibling arrived, want active", state)
	}
	send(l.Clips[0].Key, false)
	waitUntil(t, 10*time.Second, "the lease to be revoked", func() bool {
		db.QueryRow(ctx, `SELECT state FROM research.leases WHERE id = $1`, l.ID).Scan(&state)
		return state == "revoked"
	})
	resp, err := http.Get("http://" + svc.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "archivist_cwa_results_total") && strings.Contains(line, `outcome="duplicate"`) {
			t.Errorf("a waiting final result counted as a duplicate: %s", line)
		}
	}
	if !strings.Contains(metrics, fmt.Sprintf(`archivist_cwa_results_total{outcome="stored",service="cwa"} %d`, 2)) {
		t.Errorf("stored results in the metrics:\n%s", grepLines(metrics, "archivist_cwa_results_total"))
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

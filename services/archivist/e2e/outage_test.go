package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/cwa/cwa"
)

// TestPostgresRestartLosesNoResults: the cwa's PostgreSQL stops while
// results arrive and stays down for 8 seconds (the cwa used to give up
// after ~1.5 s and dead-letter every result in flight); its consumer
// pauses instead, and once PostgreSQL is back every result is stored,
// each on its first delivery, and nothing is dead-lettered.
func TestPostgresRestartLosesNoResults(t *testing.T) {
	ctx := context.Background()
	pg := testenv.PrivatePostgres(t)
	url := pg.URL("postgres")
	db, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := store.Migrate(ctx, db, migrations.Schema); err != nil {
		t.Fatal(err)
	}
	rs := research.New(db)
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	const clips = 8
	for i := range clips + 1 {
		kind, key := events.KindClip, fmt.Sprintf("clip:%d", i)
		if i == clips {
			kind, key = events.KindEpisode, "ep:0"
		}
		if _, _, err := rs.ApplyWork(ctx, &events.WorkUpserted{Kind: kind, Key: key, Version: at, State: events.WorkMerged,
			Media: events.Media{Key: "audio/" + key}, InitialCuratedAt: at, LatestCuratedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := rs.Lease(ctx, clips, time.Hour)
	if err != nil || l == nil || len(l.Clips) != clips {
		t.Fatalf("lease: %+v %v", l, err)
	}

	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: url}
	testenv.StartServiceIn(t, cwa.Definition(), sh, map[string]string{"RESEARCH_LEASE_DURATION": "1h", "RESEARCH_ITEM_TTL": "30m"})
	b := testenv.BusAt(t, sh.NATSURL, "researcher")

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	for i, c := range l.Clips {
		res := &events.ResearchCompleted{LeaseID: l.ID, Episode: l.Episode.Key, Clip: c.Key, Researcher: "r",
			Occurrences: []events.Occurrence{{OffsetMS: int64(i), DurationMS: 1, Confidence: 1}}}
		if i == len(l.Clips)-1 {
			res.Final, res.Sent = true, len(l.Clips)
		}
		env, _ := events.New("researcher", res)
		if _, err := b.Publish(ctx, events.SubjectResearchCompleted, env); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(8 * time.Second)
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var stored int
	for {
		db.QueryRow(ctx, `SELECT count(*) FROM research.results`).Scan(&stored)
		if stored == clips || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if stored != clips {
		t.Fatalf("%d of %d results stored after PostgreSQL came back", stored, clips)
	}
	var state string
	deadline = time.Now().Add(10 * time.Second)
	for state != "revoked" && time.Now().Before(deadline) {
		db.QueryRow(ctx, `SELECT state FROM research.leases WHERE id = $1`, l.ID).Scan(&state)
		time.Sleep(50 * time.Millisecond)
	}
	if state != "revoked" {
		t.Errorf("lease %s, want revoked by the final result", state)
	}
	st, _ := b.JetStream().Stream(ctx, events.StreamDeadLetter)
	if info, _ := st.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("%d results dead-lettered during the outage", info.State.Msgs)
	}
}

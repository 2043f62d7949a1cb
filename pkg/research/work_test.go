package research_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/research/migrations"
	kit "github.com/archivist/archivist/pkg/work"
)

// TestParkedEpisodesAreFoundAndReleased: episodes parked (their audio
// unreadable) are the work kit's parked items, with their reason; a dry
// run counts them, the release moves them to open (leased again) with the
// action in each one's history; parking an open one is the same verb
// everywhere.
func TestParkedEpisodesAreFoundAndReleased(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	s := research.New(db)
	add(t, s, work("clip", "c1", 0, 1), work("clip", "c2", 0, 1))
	for i := range 5 {
		add(t, s, work("episode", fmt.Sprintf("e%d", i), 0, i))
	}
	for _, key := range []string{"e1", "e3"} {
		if _, ok, err := s.EpisodeFailure(ctx, "", key, "audio: not a FLAC stream", ""); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	woken := 0
	ws := &kit.Store{DB: db, Schema: "research", Sources: s.WorkSources(func() { woken++ })}
	parked := kit.Filter{Pipeline: "research", States: []string{"parked"}}
	p, err := ws.Find(ctx, parked, "", 50)
	if err != nil || len(p.Items) != 2 {
		t.Fatalf("parked: %+v, %v", p.Items, err)
	}
	if it := p.Items[0]; it.Kind != "episode" || !strings.HasSuffix(it.Reason, "audio: not a FLAC stream") || it.Keys[0] != "audio/"+it.ID {
		t.Fatalf("item %+v", it)
	}
	if p, err := ws.Find(ctx, kit.Filter{Query: "flac"}, "", 50); err != nil || len(p.Items) != 2 {
		t.Fatalf("by the words of the reason: %d, %v", len(p.Items), err)
	}
	c, err := ws.DryRun(ctx, kit.Release, parked)
	if err != nil || c.N != 2 {
		t.Fatalf("dry run: %+v, %v", c, err)
	}
	a, err := ws.Act(ctx, kit.Release, parked, 2, "ops")
	if err != nil || a.Moved != 2 || woken != 1 {
		t.Fatalf("release: %+v, %v (woken %d)", a, err, woken)
	}
	if p, _ := ws.Find(ctx, kit.Filter{ID: "e3"}, "", 5); len(p.Items) != 1 || p.Items[0].State != "open" {
		t.Fatalf("e3 after the release: %+v", p.Items)
	}
	h, err := s.History(ctx, "e3")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range h.Events {
		found = found || (e.What == "release" && e.Detail == fmt.Sprintf("work action %d by ops", a.ID))
	}
	if !found {
		t.Fatalf("e3's history has no release: %+v", h.Events)
	}
	// Park the open ones older than nothing: all five but those leased.
	open := kit.Filter{Pipeline: "research", States: []string{"open"}}
	if c, err := ws.DryRun(ctx, kit.Park, open); err != nil || c.N != 5 {
		t.Fatalf("dry-run park: %+v, %v", c, err)
	}
	if _, err := ws.Act(ctx, kit.Park, open, 5, "ops"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Lease(ctx, 2, 60e9); err != nil || l != nil {
		t.Fatalf("a lease with every episode parked: %+v, %v", l, err)
	}
}

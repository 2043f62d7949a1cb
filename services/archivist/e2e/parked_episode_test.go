package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/testenv"
	"github.com/archivist/archivist/services/archivist/researchcmd"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestEpisodeWithMissingMediaIsParked: an episode whose audio object does
// not exist is parked with "not found" as its reason and holds no lease,
// at once, while the other episode is researched; released by an operator
// once its audio is there, it is researched.
func TestEpisodeWithMissingMediaIsParked(t *testing.T) {
	const rate = 22050
	clip := locatetest.Jingle(41, 3, rate)
	ep := locatetest.Bed(71, 20, rate)
	locatetest.Insert(ep, clip, 5*rate, 0.7)
	audio := func(kind string, i int) []byte {
		if kind == events.KindClip {
			return locatetest.WAV(clip, rate)
		}
		return locatetest.WAV(ep, rate)
	}
	w := newWorldAt(t, testenv.NATS(t), nil, 2, 1, audio)
	ctx := context.Background()
	// ep:000 has priority 0, ep:001 priority 1: the missing one is leased second.
	if err := w.shared.Blob.Delete(ctx, "audio/ep:001"); err != nil {
		t.Fatal(err)
	}
	pwaAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	w.start(named("cwa"), nil)
	w.start(locator(locate.NewLocator()), nil)
	w.start(named("pwa"), map[string]string{"PWA_HTTP_ADDR": pwaAddr, "RESEARCH_LEASE_DURATION": "10m", "RESEARCH_ITEM_TTL": "5m"})

	base := "http://" + pwaAddr
	waitUntil(t, 30*time.Second, "the episode parked and the other researched", func() bool {
		st, err := researchcmd.Fetch(ctx, base)
		return err == nil && st.Episodes.Parked == 1 && st.Episodes.Complete == 1 && len(st.Leases) == 0
	})
	st, _ := researchcmd.Fetch(ctx, base)
	if len(st.Parked) != 1 || st.Parked[0].Episode != "ep:001" || !strings.Contains(st.Parked[0].Reason, "not found") {
		t.Fatalf("parked %+v, want ep:001 with \"not found\"", st.Parked)
	}
	if n := w.leaseStates(); n["active"] != 0 || n["expired"] != 0 {
		t.Errorf("leases %v: the parked episode's lease must be revoked at once", n)
	}
	var out bytes.Buffer
	researchcmd.Print(&out, st, time.Now())
	if !strings.Contains(out.String(), "ep:001") || !strings.Contains(out.String(), "not found") {
		t.Errorf("status does not show the parked episode:\n%s", out.String())
	}

	// Fixed and released: researched.
	if _, err := w.shared.Blob.Put(ctx, "audio/ep:001", bytes.NewReader(locatetest.WAV(ep, rate)), nil); err != nil {
		t.Fatal(err)
	}
	if err := researchcmd.Release(ctx, base, "ep:001"); err != nil {
		t.Fatal(err)
	}
	if err := researchcmd.Release(ctx, base, "ep:001"); err == nil || !strings.Contains(err.Error(), "no parked episode") {
		t.Errorf("second release: %v", err)
	}
	w.waitStored(30 * time.Second)

	// An operator has an episode researched again: retry (its failed clips:
	// none here), redo (all of them: its result forgotten, then stored
	// again); an unknown episode is a 404.
	if n, err := researchcmd.Redo(ctx, base, "ep:000", "retry"); err != nil || n != 0 {
		t.Errorf("retry of an episode without failed clips: %d %v, want 0 forgotten", n, err)
	}
	if n, err := researchcmd.Redo(ctx, base, "ep:000", "redo"); err != nil || n != 1 {
		t.Fatalf("redo: %d %v, want 1 result forgotten", n, err)
	}
	w.waitStored(30 * time.Second)
	if _, err := researchcmd.Redo(ctx, base, "ep:nope", "redo"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("redo of an unknown episode: %v", err)
	}
}

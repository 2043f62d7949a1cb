package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/archivist/researchcmd"
	"github.com/archivist/archivist/services/researcher/locate"
	"github.com/archivist/archivist/services/researcher/locate/locatetest"
)

// TestEpisodeWhoseMediaArrivesLate: an episode whose audio object is not in
// the store (yet) is not parked: it waits, backing off, holding no lease,
// listed as retrying with its reason, while the other episode is
// researched; when its audio is stored (archive.object.recorded) it is
// researched at once. An episode whose audio is not the bytes its sha256
// names is parked, and released by an operator once fixed.
func TestEpisodeWhoseMediaArrivesLate(t *testing.T) {
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
	// ep:000 has priority 0, ep:001 priority 1: the missing one is leased first.
	if err := w.shared.Blob.Delete(ctx, "audio/ep:001"); err != nil {
		t.Fatal(err)
	}
	pwaAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	// Its wait is long: only the media's arrival can release it in time.
	// The cwa records the failure and its next attempt, so it reads the
	// same policy as the pwa (as every research service does in a
	// deployment).
	wait := map[string]string{"RESEARCH_RETRY_BASE": "1h", "RESEARCH_RETRY_MAX": "1h"}
	w.start(named("cwa"), wait)
	w.start(locator(locate.NewLocator()), nil)
	w.start(named("pwa"), map[string]string{"PWA_HTTP_ADDR": pwaAddr, "RESEARCH_LEASE_DURATION": "10m", "RESEARCH_ITEM_TTL": "5m",
		"RESEARCH_RETRY_BASE": wait["RESEARCH_RETRY_BASE"], "RESEARCH_RETRY_MAX": wait["RESEARCH_RETRY_MAX"]})

	base := "http://" + pwaAddr
	var st research.Status
	waitUntil(t, 30*time.Second, "the episode waiting for its media and the other researched", func() bool {
		var err error
		st, err = researchcmd.Fetch(ctx, base)
		return err == nil && len(st.Retrying) == 1 && st.Episodes.Complete == 1 && len(st.Leases) == 0
	})
	if r := st.Retrying[0]; r.Episode != "ep:001" || r.Clip != "" || !strings.Contains(r.Reason, "not found") || st.Episodes.Parked != 0 {
		t.Fatalf("retrying %+v, parked %d: want ep:001 waiting with \"not found\", nothing parked", st.Retrying, st.Episodes.Parked)
	}
	if n := w.leaseStates(); n["active"] != 0 || n["expired"] != 0 {
		t.Errorf("leases %v: the waiting episode's lease must be revoked at once", n)
	}
	var out bytes.Buffer
	researchcmd.Print(&out, st, time.Now())
	if !strings.Contains(out.String(), "RETRYING") || !strings.Contains(out.String(), "ep:001") {
		t.Errorf("status does not show the waiting episode:\n%s", out.String())
	}

	// The media arrives: researched without an operator.
	if _, err := w.shared.Blob.Put(ctx, "audio/ep:001", bytes.NewReader(locatetest.WAV(ep, rate)), nil); err != nil {
		t.Fatal(err)
	}
	curator := testenv.BusAt(t, w.shared.NATSURL, "curator")
	if _, _, err := curator.PublishEvent(ctx, &events.ObjectRecorded{Object: "audio/ep:001", SHA256: strings.Repeat("0", 64), Size: 1}); err != nil {
		t.Fatal(err)
	}
	w.waitStored(30 * time.Second)

	// Audio that is not the bytes its sha256 names parks the episode at
	// once; fixed and released by an operator, it is researched.
	if _, err := w.shared.Blob.Put(ctx, "audio/ep:000", bytes.NewReader(locatetest.WAV(clip, rate)), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := researchcmd.Redo(ctx, base, "ep:000", "redo"); err != nil || n != 1 {
		t.Fatalf("redo: %d %v, want 1 result forgotten", n, err)
	}
	waitUntil(t, 30*time.Second, "the episode parked", func() bool {
		var err error
		st, err = researchcmd.Fetch(ctx, base)
		return err == nil && st.Episodes.Parked == 1 && len(st.Leases) == 0
	})
	if len(st.Parked) != 1 || st.Parked[0].Episode != "ep:000" || !strings.Contains(st.Parked[0].Reason, "sha256") {
		t.Fatalf("parked %+v, want ep:000 with its sha256 mismatch", st.Parked)
	}
	if _, err := w.shared.Blob.Put(ctx, "audio/ep:000", bytes.NewReader(locatetest.WAV(ep, rate)), nil); err != nil {
		t.Fatal(err)
	}
	if err := researchcmd.Release(ctx, base, "ep:000", work.Release); err != nil {
		t.Fatal(err)
	}
	if err := researchcmd.Release(ctx, base, "ep:000", work.Release); err == nil || !strings.Contains(err.Error(), "not in a state release moves") {
		t.Errorf("second release: %v", err)
	}
	w.waitStored(30 * time.Second)

	// An operator has an episode researched again: retry (its failed clips:
	// none here, so nothing to move); an unknown episode is a 404.
	if err := researchcmd.Release(ctx, base, "ep:000", work.Retry); err == nil || !strings.Contains(err.Error(), "not in a state retry moves") {
		t.Errorf("retry of an episode without failed clips: %v", err)
	}
	if _, err := researchcmd.Redo(ctx, base, "ep:nope", "redo"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("redo of an unknown episode: %v", err)
	}
}

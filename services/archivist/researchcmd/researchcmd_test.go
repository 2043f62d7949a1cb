package researchcmd_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/services/archivist/researchcmd"
)

// TestPrintShowsWhatAnOperatorActsOn: counts, leases with their time
// left, parked episodes with the command that releases them, retrying
// work with its next attempt, and failed clips; sections with nothing in
// them are left out (but the leases, which say "(none)").
func TestPrintShowsWhatAnOperatorActsOn(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var st research.Status
	st.Episodes.Complete, st.Episodes.Parked = 4, 1
	st.Clips, st.Results = 12, 30
	st.Leases = []research.LeaseInfo{{ID: "l-1", Episode: "radio:ep1", Clips: 3, ExpiresAt: now.Add(90 * time.Second)}}
	st.Parked = []research.ParkedInfo{{Episode: "radio:ep2", At: now, Reason: "not audio"}}
	st.Retrying = []research.RetryInfo{{Episode: "radio:ep3", Failures: 2, NextAt: now.Add(time.Minute), Reason: "media not in the store"}}
	var b bytes.Buffer
	if err := researchcmd.Print(&b, st, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{"complete 4", "parked 1", "results stored 30", "l-1", "1m30s", "archivist research release EPISODE", "not audio",
		"(the episode)", "media not in the store"} {
		if !strings.Contains(out, w) {
			t.Errorf("the status lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "FAILED CLIP") {
		t.Errorf("an empty section is shown:\n%s", out)
	}
	b.Reset()
	if err := researchcmd.Print(&b, research.Status{}, now); err != nil || !strings.Contains(b.String(), "(none)") {
		t.Errorf("no leases: %q, %v", b.String(), err)
	}
}

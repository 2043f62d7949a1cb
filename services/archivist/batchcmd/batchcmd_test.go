package batchcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/services/archivist/batchcmd"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/views"
)

// TestBarCountsJobsByState: the bar fills with completed jobs, marks failed
// ones, and names every other state that holds a job, in the order of the steps.
func TestBarCountsJobsByState(t *testing.T) {
	t.Parallel()
	st := &views.Status{ID: 7, State: ingest.Processing, Jobs: map[ingest.State]int{
		ingest.Completed: 5, ingest.Failed: 1, ingest.Downloading: 2, ingest.Pending: 2}}
	got := batchcmd.Bar(st, 10)
	want := "batch 7 [#####x....] 5/10 processing pending 2, downloading 2, failed 1"
	if got != want {
		t.Errorf("bar:\n got %q\nwant %q", got, want)
	}
	if got := batchcmd.Bar(&views.Status{ID: 8, State: ingest.Pending}, 4); got != "batch 8 [....] 0/0 pending " {
		t.Errorf("a batch without jobs yet: %q", got)
	}
}

// TestListsSayWhyAndWhenEmpty: a listed job shows why it failed, or,
// still trying, its last attempt's error; an empty list says so.
func TestListsSayWhyAndWhenEmpty(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 10, 30, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := batchcmd.PrintList(&b, "job", []views.Listed{
		{ID: 1, Batch: 9, Profile: "films", LocalID: "f-1", State: ingest.Failed, StateAt: at, Error: "digest mismatch"},
		{ID: 2, Batch: 9, Profile: "films", LocalID: "f-2", State: ingest.Downloading, StateAt: at, Attempts: 3, LastAttemptError: "origin said 503"},
	}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{"JOB", "LOCAL ID", "digest mismatch", "origin said 503", "2026-11-27 10:30"} {
		if !strings.Contains(out, w) {
			t.Errorf("the job list lacks %q:\n%s", w, out)
		}
	}
	b.Reset()
	if err := batchcmd.PrintList(&b, "batch", nil); err != nil || !strings.Contains(b.String(), "(none)") {
		t.Errorf("an empty batch list: %q, %v", b.String(), err)
	}
}

// TestFollowEndsWithTheBatch: following a batch draws its bar until it
// ends, then prints its status; a batch that fails is an error naming it.
func TestFollowEndsWithTheBatch(t *testing.T) {
	t.Parallel()
	for _, end := range []ingest.State{ingest.Completed, ingest.Failed} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/batches/3" {
				http.NotFound(w, r)
				return
			}
			st := views.Status{Entity: ingest.Batch, ID: 3, State: ingest.Processing, Profile: "films", Jobs: map[ingest.State]int{ingest.Downloading: 1}}
			if calls.Add(1) >= 3 {
				st.State, st.Jobs = end, map[ingest.State]int{ingest.Completed: 1}
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(st)
		}))
		var b bytes.Buffer
		err := batchcmd.Follow(context.Background(), srv.URL, 3, &b, time.Millisecond)
		srv.Close()
		if end == ingest.Completed && err != nil {
			t.Errorf("a completed batch: %v", err)
		}
		if end == ingest.Failed && (err == nil || !strings.Contains(err.Error(), "batch 3 is failed")) {
			t.Errorf("a failed batch: %v; want an error naming it", err)
		}
		if calls.Load() != 3 || !strings.Contains(b.String(), "batch 3 [") || !strings.Contains(b.String(), "collection films") {
			t.Errorf("followed with %d reads, drew:\n%s", calls.Load(), b.String())
		}
	}
}

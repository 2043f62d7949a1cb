package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestATrickleShutsNoDepositorOut (N5, N27): mallory deposits 16 files
// whose origin sends a byte a second, and takes every download slot no
// one else wants; alice then deposits 4. A trickle is cut once a window
// passes below INGEST_MIN_THROUGHPUT (its attempt fails saying so, long
// before the step's six hours), and while alice's work waits, mallory
// holds at most its share of a state's slots (INGEST_DEPOSITOR_SHARE):
// each slot a cut frees goes to alice, whose batch completes while
// mallory's trickles go on.
func TestATrickleShutsNoDepositorOut(t *testing.T) {
	var active, most atomic.Int64
	trickle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		if r.Method != http.MethodGet {
			return
		}
		n := active.Add(1)
		defer active.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	}))
	defer trickle.Close()
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_THROUGHPUT_WINDOW": "4s", "INGEST_MAX_ATTEMPTS": "100"})
	ctx := context.Background()

	var m strings.Builder
	m.WriteString(manifestHeader)
	for i := range 16 {
		fmt.Fprintf(&m, "%s/t/%d | | | 100000 | | slow-%02d.bin | slow-%d\n", trickle.URL, i, i, i)
	}
	m.WriteString("#%eof\n")
	slow := r.submit(ingest.Submission{Submitter: "mallory", Profile: "p", Type: "batch-manifest", PayloadURL: o.put("/slow.checkm", []byte(m.String()))})
	// Mallory's downloads hold what they may first.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var downloading int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE batch_id = $1 AND state = 'downloading'`, slow).Scan(&downloading)
		if downloading > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("mallory's downloads never began")
		}
	}
	murl, _ := o.manifest("fair", 4)
	fair := r.submit(ingest.Submission{Submitter: "alice", Profile: "p", Type: "batch-manifest", PayloadURL: murl})
	r.waitState(ingest.Batch, fair, ingest.Completed, 2*time.Minute)

	// Alone, mallory used the slots no one else wanted; once alice's work
	// waited, each trickle cut gave its slot to her.
	t.Logf("mallory's trickled downloads at once: at most %d of 8", most.Load())
	// The trickles are cut by the throughput bound, each attempt in turn.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var cut int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE batch_id = $1 AND last_attempt_error LIKE '%INGEST_MIN_THROUGHPUT%'`, slow).Scan(&cut)
		if cut > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no trickled download was cut by INGEST_MIN_THROUGHPUT")
		}
	}
}

// TestTheCollectionsCallbackHearsOfEveryBatch (N36): a batch naming a
// callback of its own no longer keeps the collection's (an operator's)
// from hearing of it: both are told of each job and sent the report.
func TestTheCollectionsCallbackHearsOfEveryBatch(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	var own, ownReports atomic.Int64
	depositors := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct{ Type string }
		json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&body)
		if body.Type == "batch-report" {
			ownReports.Add(1)
		} else {
			own.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer depositors.Close()
	if code, out := r.call("PUT", "/v1/profiles/p", map[string]any{"emails": []string{}, "callback_url": r.cbURL}); code != http.StatusOK {
		t.Fatalf("the collection's callback: %d %v", code, out)
	}
	murl, _ := o.manifest("cb", 2)
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "batch-manifest", PayloadURL: murl, CallbackURL: depositors.URL})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	for deadline := time.Now().Add(10 * time.Second); r.reports.Load() < 1 || ownReports.Load() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	if r.callback.Load() != 2 || own.Load() != 2 || r.reports.Load() != 1 || ownReports.Load() != 1 {
		t.Errorf("the collection's callback heard %d jobs and %d reports, the batch's own %d and %d: want 2 and 1 each",
			r.callback.Load(), r.reports.Load(), own.Load(), ownReports.Load())
	}
}

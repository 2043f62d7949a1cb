package httpapi_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/httpapi"
	"github.com/archivist/archivist/services/curator/ingest/ingesttest"
	"github.com/archivist/archivist/services/curator/ingest/views"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestADepositorReadsItsOwnAlone: a depositor's key reads its own batch,
// job and history; another depositor's are "not found", as unknown ids
// are, and its lists hold its own alone; an operator reads them all; a
// bad id or state is a 400 naming the field.
func TestADepositorReadsItsOwnAlone(t *testing.T) {
	db := testenv.DB(t, migrations.Schema)
	mux := http.NewServeMux()
	httpapi.Routes(mux, ingest.NewStore(db), nil, slog.New(slog.DiscardHandler))
	radioBatch := ingesttest.NewBatch(t, db, ingesttest.Batch{Submitter: "radio", Profile: "radio"})
	radioJob := ingesttest.NewJob(t, db, ingesttest.Job{Batch: radioBatch, Submitter: "radio", Profile: "radio", LocalID: "jingle-1", ARK: "ark:/99999/r1"})
	tvBatch := ingesttest.NewBatch(t, db, ingesttest.Batch{Submitter: "tv", Profile: "tv"})
	tvJob := ingesttest.NewJob(t, db, ingesttest.Job{Batch: tvBatch, Submitter: "tv", Profile: "tv", State: "failed", Error: "a digest did not match"})

	radio := apiauth.Identity{Name: "radio", Roles: []apiauth.Role{apiauth.Publisher}, Source: "radio", Collections: []string{"radio"}}
	operator := apiauth.Identity{Name: "ops", Roles: []apiauth.Role{apiauth.Operator, apiauth.Reader}}
	get := func(who apiauth.Identity, path string, into any) int {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r = r.WithContext(apiauth.WithCaller(r.Context(), who))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if into != nil && w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), into); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, w.Body)
			}
		}
		if w.Code >= 400 && !strings.Contains(w.Body.String(), `"error"`) {
			t.Errorf("GET %s: %d without an error: %s", path, w.Code, w.Body)
		}
		return w.Code
	}

	var st views.Status
	if code := get(radio, fmt.Sprintf("/v1/batches/%d", radioBatch), &st); code != http.StatusOK || st.ID != radioBatch || st.Jobs[ingest.Pending] != 1 {
		t.Errorf("its own batch: %d %+v", code, st)
	}
	for _, path := range []string{
		fmt.Sprintf("/v1/batches/%d", tvBatch), fmt.Sprintf("/v1/jobs/%d", tvJob), "/v1/batches/999999",
		fmt.Sprintf("/v1/ingest/history?job=%d", tvJob), fmt.Sprintf("/v1/ingest/history?batch=%d", tvBatch),
	} {
		if code := get(radio, path, nil); code != http.StatusNotFound {
			t.Errorf("the radio's key, GET %s: %d, want 404", path, code)
		}
	}
	var jobs []views.Listed
	if code := get(radio, "/v1/jobs?submitter=tv", &jobs); code != http.StatusOK || len(jobs) != 1 || jobs[0].ID != radioJob || jobs[0].LocalID != "jingle-1" {
		t.Errorf("the radio's jobs: %d %+v", code, jobs)
	}
	if code := get(operator, "/v1/jobs?state=failed", &jobs); code != http.StatusOK || len(jobs) != 1 || jobs[0].ID != tvJob || jobs[0].Error != "a digest did not match" {
		t.Errorf("the failed jobs, to an operator: %d %+v", code, jobs)
	}
	var h service.History
	if code := get(radio, fmt.Sprintf("/v1/ingest/history?job=%d", radioJob), &h); code != http.StatusOK || h.State != "pending" || !hasFact(h, "object", "ark:/99999/r1 v0") || !hasFact(h, "batch", fmt.Sprint(radioBatch)) {
		t.Errorf("its own job's history: %d %+v", code, h)
	}
	for path, want := range map[string]int{"/v1/jobs?state=reporting": 400, "/v1/batches?limit=0": 400, "/v1/batches/x": 400, "/v1/jobs?batch=x": 400} {
		if code := get(operator, path, nil); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
}

func hasFact(h service.History, name, value string) bool {
	for _, f := range h.Facts {
		if f.Name == name && f.Value == value {
			return true
		}
	}
	return false
}

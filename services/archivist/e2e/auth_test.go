package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/research/migrations"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	aggmigrations "github.com/archivist/archivist/services/aggregator/migrations"
	"github.com/archivist/archivist/services/archivist/refdocs"
	"github.com/archivist/archivist/services/auditor/auditor"
	auditormigrations "github.com/archivist/archivist/services/auditor/migrations"
	"github.com/archivist/archivist/services/curator/curator"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
	"github.com/archivist/archivist/services/dashboard/dashboard"
	"github.com/archivist/archivist/services/indexer/indexer"
	indexermigrations "github.com/archivist/archivist/services/indexer/migrations"
	"github.com/archivist/archivist/services/pwa/pwa"
)

// TestEveryAPIAuthenticates runs every service with an API under
// API_AUTH=keys and, for each API, calls a read and an action: without a
// key 401, with an unknown key 401, with a key lacking the role 403, with
// the right role as before. A publisher's records carry its own source
// (a body naming another is refused), its Idempotency-Keys are its own,
// and an event time from a UUIDv7 key far in the future is refused.
func TestEveryAPIAuthenticates(t *testing.T) {
	// A publisher deposits into the collection of its own name.
	keysFile, keys := testenv.KeysFile(t,
		testenv.APIKey{Name: "viewer", Roles: []apiauth.Role{apiauth.Reader}},
		testenv.APIKey{Name: "radio", Roles: []apiauth.Role{apiauth.Publisher}, Source: "radio", Collections: []string{"radio"}},
		testenv.APIKey{Name: "tv", Roles: []apiauth.Role{apiauth.Publisher}, Source: "tv", Collections: []string{"tv"}},
		testenv.APIKey{Name: "ops", Roles: []apiauth.Role{apiauth.Operator}})
	natsURL := testenv.NATS(t)
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) }
	auth := func(name, a string) map[string]string {
		return map[string]string{"API_AUTH": "keys", "API_KEYS_FILE": keysFile, name: a, "INGEST_ALLOW_PRIVATE": "true",
			"INGEST_WORK_DIR": t.TempDir(), "INGEST_MIN_FREE_BYTES": "1048576"}
	}
	apis := map[string]string{"curator": addr(), "pwa": addr(), "auditor": addr(), "indexer": addr(), "aggregator": addr(), "dashboard": addr()}
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, curatormigrations.Schema)}, auth("CURATOR_HTTP_ADDR", apis["curator"]))
	testenv.StartServiceIn(t, pwa.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, migrations.Schema)}, auth("PWA_HTTP_ADDR", apis["pwa"]))
	testenv.StartServiceIn(t, auditor.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, auditormigrations.Schema)}, auth("AUDITOR_HTTP_ADDR", apis["auditor"]))
	testenv.StartServiceIn(t, indexer.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, indexermigrations.Schema)}, auth("INDEXER_HTTP_ADDR", apis["indexer"]))
	agg := auth("AGGREGATOR_HTTP_ADDR", apis["aggregator"])
	agg["AGGREGATOR_ACCESS_POINTS"] = "public"
	testenv.StartServiceIn(t, aggregator.Definition(), testenv.Shared{NATSURL: natsURL, DBURL: testenv.DBURL(t, aggmigrations.Schema)}, agg)
	// The dashboard asks the others on its caller's behalf.
	dash := auth("DASHBOARD_HTTP_ADDR", apis["dashboard"])
	for _, api := range []string{"curator", "pwa", "auditor", "indexer", "aggregator"} {
		dash["DASHBOARD_"+strings.ToUpper(api)+"_URL"] = "http://" + apis[api]
	}
	testenv.StartServiceIn(t, dashboard.Definition(), testenv.Shared{NATSURL: natsURL}, dash)

	call := func(who, method, url, body string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		switch who {
		case "":
		case "forged":
			req.Header.Set("Authorization", "Bearer ak_not-a-key-anyone-holds")
		default:
			req.Header.Set("Authorization", "Bearer "+keys[who])
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	episode := `{"id":"ep-1","title":"One","media":{"key":"audio/ep-1.wav","sha256":""},"duration_ms":1000,"priority":1,
		"initial_curated_at":"2026-01-01T00:00:00Z","latest_curated_at":"2026-01-01T00:00:00Z"}`
	batch := `{"profile":"radio","payload_url":"http://127.0.0.1:9/none.txt","type":"file"}`
	// Every route of every API (the admin port's /healthz, /readyz and
	// /metrics are not an API: no data, and a port of their own).
	routes := []route{
		{"curator", "GET", "/v1/episodes/radio:none", "", apiauth.Reader},
		{"curator", "GET", "/v1/clips/radio:none", "", apiauth.Reader},
		{"curator", "GET", "/v1/works/episodes/none", "", apiauth.Reader},
		{"curator", "GET", "/v1/works/clips/none", "", apiauth.Reader},
		{"curator", "GET", "/v1/works/episodes/none/explain", "", apiauth.Reader},
		{"curator", "GET", "/v1/works/clips/none/explain", "", apiauth.Reader},
		{"curator", "GET", "/v1/works/episodes/decisions?key=radio:none", "", apiauth.Reader},
		{"curator", "GET", "/v1/works/clips/decisions?key=radio:none", "", apiauth.Reader},
		{"curator", "POST", "/v1/works/episodes/decisions", `{"action":"split","a":"radio:none","reason":"a test"}`, apiauth.Operator},
		{"curator", "POST", "/v1/works/clips/decisions", `{"action":"split","a":"radio:none","reason":"a test"}`, apiauth.Operator},
		{"curator", "GET", "/v1/curation/status", "", apiauth.Reader},
		{"curator", "POST", "/v1/episodes", episode, apiauth.Publisher},
		{"curator", "POST", "/v1/clips", `{}`, apiauth.Publisher},
		{"curator", "POST", "/v1/batches", batch, apiauth.Publisher},
		{"curator", "GET", "/v1/batches", "", own},
		{"curator", "GET", "/v1/jobs?state=failed", "", own},
		{"curator", "GET", "/v1/batches/999", "", own},
		{"curator", "GET", "/v1/jobs/999", "", own},
		{"curator", "POST", "/v1/batches/999/release", "", apiauth.Operator},
		{"curator", "POST", "/v1/jobs/999/hold", "", apiauth.Operator},
		{"curator", "POST", "/v1/collections/none/hold", "", apiauth.Operator},
		{"curator", "POST", "/v1/ingest/pause", "", apiauth.Operator},
		{"curator", "POST", "/v1/ingest/resume", "", apiauth.Operator},
		{"curator", "GET", "/v1/ingest/status", "", apiauth.Reader},
		{"curator", "GET", "/v1/ingest/history?batch=999", "", own},
		{"curator", "GET", "/v1/ingest/transitions", "", apiauth.Reader},
		{"curator", "GET", "/v1/objects?ark=ark:/99999/none", "", own},
		{"curator", "POST", "/v1/objects/withdraw", `{"ark":"ark:/99999/none","reason":"test"}`, apiauth.Operator},
		{"curator", "POST", "/v1/objects/reinstate", `{"ark":"ark:/99999/none","reason":"test"}`, apiauth.Operator},
		{"curator", "GET", "/v1/profiles", "", apiauth.Operator},
		{"curator", "GET", "/v1/profiles/none", "", apiauth.Operator},
		{"curator", "PUT", "/v1/profiles/none", `{"emails":[]}`, apiauth.Operator},
		{"curator", "GET", "/v1/ingest/mail/parked", "", apiauth.Operator},
		{"pwa", "GET", "/v1/research/status", "", apiauth.Reader},
		{"pwa", "GET", "/v1/research/history?episode=none", "", apiauth.Reader},
		{"pwa", "POST", "/v1/research/episodes/none/redo", "", apiauth.Operator},
		{"auditor", "GET", "/v1/audit/status", "", apiauth.Reader},
		{"auditor", "GET", "/v1/audit/history?object=objects/x", "", apiauth.Reader},
		{"auditor", "GET", "/v1/audit/parked", "", apiauth.Reader},
		{"auditor", "GET", "/v1/audit/resolutions", "", apiauth.Reader},
		{"auditor", "POST", "/v1/audit/resolutions/999/close", `{"note":"x"}`, apiauth.Operator},
		{"auditor", "POST", "/v1/audit/check", `{"object":"objects/x"}`, apiauth.Operator},
		{"auditor", "POST", "/v1/audit/resolutions/999/repair", `{"note":"x"}`, apiauth.Operator},
		{"indexer", "GET", "/v1/index/status", "", apiauth.Reader},
		{"indexer", "GET", "/v1/index/history?file=warcs/none.warc.gz", "", apiauth.Reader},
		{"aggregator", "GET", "/cdx?url=example.com", "", apiauth.Reader},
		{"aggregator", "GET", "/public/cdx?url=example.com", "", open},
		{"aggregator", "GET", "/v1/index/generations", "", apiauth.Reader},
		{"aggregator", "GET", "/v1/index/exclusions", "", apiauth.Operator},
		{"aggregator", "GET", "/v1/index/paths", "", apiauth.Reader},
		{"aggregator", "GET", "/v1/index/cdx", "", apiauth.Reader},
		{"aggregator", "GET", "/v1/index/paths/none.warc.gz", "", apiauth.Reader},
		{"aggregator", "POST", "/v1/index/exclusions", `{"surt":"com,none)/","reason":"test"}`, apiauth.Operator},
		{"aggregator", "DELETE", "/v1/index/exclusions/999999", "", apiauth.Operator},
		{"aggregator", "POST", "/v1/index/withdraw", `{"file":"warcs/none.warc.gz","reason":"test"}`, apiauth.Operator},
		{"aggregator", "POST", "/v1/index/reinstate", `{"file":"warcs/none.warc.gz"}`, apiauth.Operator},
		{"curator", "GET", "/v1/work?state=failed", "", own},
		{"curator", "GET", "/v1/work/actions", "", own},
		{"curator", "GET", "/v1/work/rates", "", apiauth.Reader},
		{"curator", "POST", "/v1/work/retry?dry_run=true&state=failed", "", depositor},
		{"pwa", "GET", "/v1/work?state=failed", "", own},
		{"pwa", "GET", "/v1/work/actions", "", own},
		{"pwa", "GET", "/v1/work/rates", "", apiauth.Reader},
		{"pwa", "POST", "/v1/work/retry?dry_run=true&state=failed", "", depositor},
		{"auditor", "GET", "/v1/work?state=failed", "", own},
		{"auditor", "GET", "/v1/work/actions", "", own},
		{"auditor", "GET", "/v1/work/rates", "", apiauth.Reader},
		{"auditor", "POST", "/v1/work/retry?dry_run=true&state=failed", "", depositor},
		{"indexer", "GET", "/v1/work?state=failed", "", own},
		{"indexer", "GET", "/v1/work/actions", "", own},
		{"indexer", "GET", "/v1/work/rates", "", apiauth.Reader},
		{"indexer", "POST", "/v1/work/retry?dry_run=true&state=failed", "", depositor},
		{"dashboard", "GET", "/", "", apiauth.Reader},
		{"dashboard", "GET", "/panels", "", apiauth.Reader},
		{"dashboard", "GET", "/mine", "", own},
		{"dashboard", "GET", "/work?state=failed", "", apiauth.Reader},
		{"dashboard", "GET", "/work/actions", "", apiauth.Reader},
		{"dashboard", "POST", "/work/act", "", depositor},
		{"dashboard", "GET", "/item?kind=batch&id=1", "", apiauth.Reader},
		{"dashboard", "GET", "/item?kind=deadletter&id=1", "", apiauth.Operator},
		{"dashboard", "POST", "/panels", "", apiauth.Operator},
	}
	checkEveryRouteListed(t, routes)
	for _, r := range routes {
		url := "http://" + apis[r.api] + r.path
		what := r.api + " " + r.method + " " + r.path
		for _, who := range []string{"", "forged"} {
			if code, body := call(who, r.method, url, r.body); code != http.StatusUnauthorized && !(r.role == open && who == "" && code == http.StatusOK) {
				t.Errorf("%s with key %q: %d %s, want 401 (200 without a key on an open route)", what, who, code, body)
			}
		}
		allowed := map[apiauth.Role][]string{own: {"viewer", "radio", "ops"}, apiauth.Reader: {"viewer", "ops"}, apiauth.Publisher: {"radio"},
			apiauth.Operator: {"ops"}, depositor: {"radio", "ops"}, open: {"viewer", "radio", "ops"}}[r.role]
		for _, who := range []string{"viewer", "radio", "ops"} {
			code, body := call(who, r.method, url, r.body)
			may := false
			for _, a := range allowed {
				may = may || a == who
			}
			if !may && code != http.StatusForbidden {
				t.Errorf("%s as %s: %d %s, want 403", what, who, code, body)
			}
			if may && (code == http.StatusUnauthorized || code == http.StatusForbidden) {
				t.Errorf("%s as %s: %d %s, want it served", what, who, code, body)
			}
		}
	}

	// The dashboard passed each caller's own key on: a reader sees every
	// panel (no API refused it).
	if code, body := call("viewer", "GET", "http://"+apis["dashboard"]+"/panels", ""); code != http.StatusOK || strings.Contains(body, `class="err"`) || !strings.Contains(body, `id="research-complete"`) {
		t.Errorf("the dashboard's panels as a reader: %d %s", code, body)
	}

	// A publisher's records carry its source; another source is refused.
	curatorURL := "http://" + apis["curator"]
	other := strings.Replace(episode, `"id":"ep-1"`, `"id":"ep-2","source":"tv"`, 1)
	if code, body := call("radio", "POST", curatorURL+"/v1/episodes", other); code != http.StatusForbidden || !strings.Contains(body, `source \"radio\"`) {
		t.Errorf("a publisher posing as another source: %d %s, want 403", code, body)
	}
	waitUntil(t, 15*time.Second, "radio:ep-1 stored", func() bool {
		code, body := call("viewer", "GET", curatorURL+"/v1/episodes/radio:ep-1", "")
		var rec struct{ Producer string }
		json.Unmarshal([]byte(body), &rec)
		return code == http.StatusOK && rec.Producer == "radio"
	})
	// Idempotency keys are each publisher's own: the same key from another
	// publisher is another event.
	first := func(who, id string) string {
		t.Helper()
		body := strings.Replace(episode, `"id":"ep-1"`, `"id":"`+id+`"`, 1)
		code, out := call(who, "POST", curatorURL+"/v1/episodes", body, "Idempotency-Key", "same-key")
		var acc struct {
			ID        string
			Duplicate bool
		}
		json.Unmarshal([]byte(out), &acc)
		if code != http.StatusAccepted || acc.Duplicate {
			t.Errorf("%s's POST with Idempotency-Key same-key: %d %s, want a new event", who, code, out)
		}
		return acc.ID
	}
	if a, b := first("radio", "ep-3"), first("tv", "ep-3"); a == b {
		t.Errorf("two publishers' same Idempotency-Key made one event id %q", a)
	}
	// An event time from the far future would win for ever: refused.
	key := futureUUIDv7(time.Now().AddDate(1, 0, 0))
	if code, body := call("radio", "POST", curatorURL+"/v1/episodes", episode, "Idempotency-Key", key); code != http.StatusBadRequest || !strings.Contains(body, "future") {
		t.Errorf("a UUIDv7 key a year ahead: %d %s, want 400", code, body)
	}

	// Depositors reach only their own: tv's batch is tv's.
	tvBatch := strings.Replace(batch, `"radio"`, `"tv"`, 1)
	code, body := call("tv", "POST", curatorURL+"/v1/batches", tvBatch)
	var made struct{ Batch int64 }
	if json.Unmarshal([]byte(body), &made); code != http.StatusCreated || made.Batch == 0 {
		t.Fatalf("tv deposits into tv: %d %s", code, body)
	}
	for _, c := range []struct{ what, body, want string }{
		{"radio deposits as tv", strings.Replace(batch, `{`, `{"submitter":"tv",`, 1), `deposits as \"radio\", not \"tv\"`},
		{"radio deposits into tv's collection", tvBatch, `into radio, not \"tv\"`},
	} {
		if code, body := call("radio", "POST", curatorURL+"/v1/batches", c.body); code != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 403 saying %s", c.what, code, body, c.want)
		}
	}
	tvPaths := []string{fmt.Sprintf("/v1/batches/%d", made.Batch), fmt.Sprintf("/v1/ingest/history?batch=%d", made.Batch)}
	for _, path := range tvPaths {
		if code, body := call("radio", "GET", curatorURL+path, ""); code != http.StatusNotFound {
			t.Errorf("radio reads tv's %s: %d %s, want 404", path, code, body)
		}
		for _, who := range []string{"tv", "ops", "viewer"} {
			if code, body := call(who, "GET", curatorURL+path, ""); code != http.StatusOK {
				t.Errorf("%s reads tv's %s: %d %s", who, path, code, body)
			}
		}
	}
	for _, path := range []string{"/v1/batches", fmt.Sprintf("/v1/jobs?batch=%d", made.Batch)} {
		if _, body := call("radio", "GET", curatorURL+path, ""); strings.Contains(body, `"submitter":"tv"`) {
			t.Errorf("radio lists tv's work at %s: %s", path, body)
		}
	}
	if _, body := call("ops", "GET", curatorURL+"/v1/batches?submitter=tv", ""); !strings.Contains(body, `"submitter":"tv"`) {
		t.Errorf("the operator lists tv's batches: %s", body)
	}
	// The dashboard is staff's: a publisher key is no reader (N24).
	if code, body := call("radio", "GET", fmt.Sprintf("http://%s/item?kind=batch&id=%d", apis["dashboard"], made.Batch), ""); code != http.StatusForbidden {
		t.Errorf("radio's dashboard view of tv's batch: %d %s, want 403", code, body)
	}
}

// own marks, in TestEveryAPIAuthenticates's table, a read a publisher
// may make of its own (and staff of everyone's): a publisher key does not
// imply the reader role (N24).
const own apiauth.Role = "own"

// depositor marks, in TestEveryAPIAuthenticates's table, an action a
// publisher may take on its own work and an operator on anyone's (a
// reader none): the work kit's verbs.
const depositor apiauth.Role = "depositor"

// open marks, in TestEveryAPIAuthenticates's table, a route anyone may
// call without a key (an access point of the index); a wrong key is still
// refused.
const open apiauth.Role = "open"

// route is a call in TestEveryAPIAuthenticates's table, and the role it
// needs.
type route struct {
	api, method, path, body string
	role                    apiauth.Role
}

// checkEveryRouteListed fails unless every route the services register
// (read from their sources: refdocs.ServiceRoutes) is called in routes,
// so that a route added later without its row is caught here.
func checkEveryRouteListed(t *testing.T, routes []route) {
	t.Helper()
	byService, err := refdocs.ServiceRoutes("../../..")
	if err != nil {
		t.Fatal(err)
	}
	muxes := map[string]*http.ServeMux{}
	var all []string
	for api, rs := range byService {
		muxes[api] = http.NewServeMux()
		for _, p := range slices.Compact(slices.Sorted(slices.Values(rs))) {
			muxes[api].HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
			all = append(all, api+" "+p)
		}
	}
	if len(all) < 40 {
		t.Fatalf("read %d routes from the services' sources; the walk is broken", len(all))
	}
	called := map[string]bool{}
	for _, r := range routes {
		if mux := muxes[r.api]; mux != nil {
			_, p := mux.Handler(httptest.NewRequest(r.method, r.path, nil))
			called[r.api+" "+p] = true
		}
	}
	for _, p := range all {
		if !called[p] {
			t.Errorf("route %s is not in TestEveryAPIAuthenticates's table", p)
		}
	}
}

// futureUUIDv7 is a version 7 UUID carrying time at.
func futureUUIDv7(at time.Time) string {
	var u uuid.UUID
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = 0x70
	u[8] = 0x80
	return u.String()
}

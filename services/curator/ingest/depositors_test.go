package ingest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/services/curator/ingest"
)

// TestDepositorsReachOnlyTheirOwn: a publisher's batch is deposited as the
// publisher (a body naming another submitter is refused) into a collection
// its key names; an object's ARK is reused only for the same depositor's
// local id in the same collection, so a depositor that learns another's
// local id makes an object of its own, never a new version of the other's;
// a publisher lists and reads only its own batches and jobs (another's is
// 404, as an unknown one), and an operator sees all.
func TestDepositorsReachOnlyTheirOwn(t *testing.T) {
	file, keys := testenv.KeysFile(t,
		testenv.APIKey{Name: "alice", Roles: []apiauth.Role{apiauth.Publisher}, Source: "alice", Collections: []string{"p"}},
		testenv.APIKey{Name: "bob", Roles: []apiauth.Role{apiauth.Publisher}, Source: "bob", Collections: []string{"p", "q"}},
		testenv.APIKey{Name: "nobody", Roles: []apiauth.Role{apiauth.Publisher}, Source: "nobody"},
		testenv.APIKey{Name: "ops", Roles: []apiauth.Role{apiauth.Operator}})
	o := newOrigin(t)
	r := newRig(t, map[string]string{"API_AUTH": "keys", "API_KEYS_FILE": file})
	as := func(who, method, path string, body any) (int, map[string]any) {
		t.Helper()
		return r.callWith(method, path, body, map[string]string{"Authorization": "Bearer " + keys[who]})
	}
	murl, _ := o.manifest("obj", 2)
	deposit := func(who string, sub ingest.Submission) int64 {
		t.Helper()
		code, out := as(who, "POST", "/v1/batches", sub)
		if code != http.StatusCreated {
			t.Fatalf("%s deposits %+v: %d %v", who, sub, code, out)
		}
		id := int64(out["batch"].(float64))
		r.waitState(ingest.Batch, id, ingest.Completed, 30*time.Second)
		return id
	}
	sub := ingest.Submission{Profile: "p", PayloadURL: murl, Type: "batch-manifest"}

	// Refused: another's name, a collection the key does not name, a key
	// with no collections.
	for _, c := range []struct {
		who  string
		sub  ingest.Submission
		want string
	}{
		{"bob", ingest.Submission{Submitter: "alice", Profile: "p", PayloadURL: murl, Type: "batch-manifest"}, `deposits as "bob", not "alice"`},
		{"alice", ingest.Submission{Profile: "q", PayloadURL: murl, Type: "batch-manifest"}, `into p, not "q"`},
		{"nobody", sub, "no collection"},
	} {
		if code, out := as(c.who, "POST", "/v1/batches", c.sub); code != http.StatusForbidden || !strings.Contains(fmt.Sprint(out["error"]), c.want) {
			t.Errorf("%s deposits %+v: %d %v, want 403 saying %q", c.who, c.sub, code, out, c.want)
		}
	}
	var n int
	r.db.QueryRow(t.Context(), `SELECT count(*) FROM curator.batches`).Scan(&n)
	if n != 0 {
		t.Fatalf("refused deposits made %d batches", n)
	}

	alice1 := deposit("alice", sub)
	bob1 := deposit("bob", sub) // the same local ids, learned somehow
	alice2 := deposit("alice", sub)
	arks := func(batch int64) (out []string) {
		rows, err := r.db.Query(t.Context(), `SELECT ark || ' v' || version FROM curator.jobs WHERE batch_id = $1 ORDER BY local_id`, batch)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			rows.Scan(&s)
			out = append(out, s)
		}
		return out
	}
	a1, b1, a2 := arks(alice1), arks(bob1), arks(alice2)
	if len(a1) != 2 || len(b1) != 2 || len(a2) != 2 {
		t.Fatalf("jobs: alice %v, bob %v, alice again %v", a1, b1, a2)
	}
	for i := range a1 {
		aArk, _, _ := strings.Cut(a1[i], " ")
		bArk, bVersion, _ := strings.Cut(b1[i], " ")
		if bArk == aArk || bVersion != "v1" {
			t.Errorf("bob's deposit of alice's local id %d: %s, alice's %s: want an object of his own, version 1", i, b1[i], a1[i])
		}
		if a2[i] != aArk+" v2" {
			t.Errorf("alice's second deposit of her local id %d: %s, want %s v2", i, a2[i], aArk)
		}
	}

	// Lists and reads: a depositor's own.
	ids := func(who, path string) (out []string) {
		t.Helper()
		req, _ := http.NewRequest("GET", r.api+path, nil)
		req.Header.Set("Authorization", "Bearer "+keys[who])
		code, list := r.list(req)
		if code != http.StatusOK {
			t.Fatalf("%s GET %s: %d", who, path, code)
		}
		for _, l := range list {
			out = append(out, fmt.Sprintf("%v:%v", l["submitter"], l["id"]))
		}
		return out
	}
	if got := ids("bob", "/v1/batches"); strings.Join(got, " ") != fmt.Sprintf("bob:%d", bob1) {
		t.Errorf("bob's batches: %v, want only his own", got)
	}
	if got := ids("bob", "/v1/jobs?batch="+fmt.Sprint(alice1)); len(got) != 0 {
		t.Errorf("bob lists alice's batch's jobs: %v", got)
	}
	if got := ids("alice", "/v1/jobs"); len(got) != 4 || strings.Contains(strings.Join(got, " "), "bob") {
		t.Errorf("alice's jobs: %v, want her 4", got)
	}
	if got := ids("ops", "/v1/batches"); len(got) != 3 {
		t.Errorf("the operator's batches: %v, want all 3", got)
	}
	if got := ids("ops", "/v1/batches?submitter=bob"); strings.Join(got, " ") != fmt.Sprintf("bob:%d", bob1) {
		t.Errorf("the operator's batches of bob: %v", got)
	}
	var aliceJob int64
	r.db.QueryRow(t.Context(), `SELECT min(id) FROM curator.jobs WHERE batch_id = $1`, alice1).Scan(&aliceJob)
	for _, path := range []string{fmt.Sprintf("/v1/batches/%d", alice1), fmt.Sprintf("/v1/jobs/%d", aliceJob),
		fmt.Sprintf("/v1/ingest/history?batch=%d", alice1), fmt.Sprintf("/v1/ingest/history?job=%d", aliceJob)} {
		if code, out := as("bob", "GET", path, nil); code != http.StatusNotFound {
			t.Errorf("bob GET %s (alice's): %d %v, want 404", path, code, out)
		}
		if code, out := as("alice", "GET", path, nil); code != http.StatusOK {
			t.Errorf("alice GET %s (her own): %d %v", path, code, out)
		}
		if code, out := as("ops", "GET", path, nil); code != http.StatusOK {
			t.Errorf("ops GET %s: %d %v", path, code, out)
		}
	}

	// Objects: a depositor's own; another's is as unknown (N24). A
	// publisher key is no reader: the collections' settings (callback
	// tokens) and the mails parked are staff's who act.
	aliceARK, _, _ := strings.Cut(a1[0], " ")
	objects := "/v1/objects?ark=" + url.QueryEscape(aliceARK)
	if code, out := as("alice", "GET", objects, nil); code != http.StatusOK || out["ark"] != aliceARK {
		t.Errorf("alice reads her object %s: %d %v", aliceARK, code, out)
	}
	if code, out := as("bob", "GET", objects, nil); code == http.StatusOK || !strings.Contains(fmt.Sprint(out["error"]), "no object") {
		t.Errorf("bob reads alice's object %s: %d %v, want it unknown to him", aliceARK, code, out)
	}
	if code, out := as("ops", "GET", objects, nil); code != http.StatusOK {
		t.Errorf("ops reads alice's object: %d %v", code, out)
	}
	for _, path := range []string{"/v1/profiles", "/v1/profiles/p", "/v1/ingest/mail/parked"} {
		if code, out := as("alice", "GET", path, nil); code != http.StatusForbidden {
			t.Errorf("alice GET %s: %d %v, want 403", path, code, out)
		}
		if code, out := as("ops", "GET", path, nil); code != http.StatusOK {
			t.Errorf("ops GET %s: %d %v", path, code, out)
		}
	}
}

// list does req and decodes the JSON list it answers.
func (r *rig) list(req *http.Request) (int, []map[string]any) {
	r.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
	return resp.StatusCode, out
}

package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/inventory"
	"github.com/archivist/archivist/services/curator/ingest/withdraw"
)

// TestWithdrawals: withdrawing version 2 of an object deletes the files
// only it held (a file carried from version 1 stays), withdrawing the
// object deletes the rest; the inventory keeps both as tombstones with
// their reasons, and the store a tombstone of each version. A new
// submission of the object fails, saying it is withdrawn (a deposit does
// not undo a takedown); reinstated by an operator and requeued, it makes
// version 3 of its own files. A withdrawal without a reason, or of an
// object the inventory does not have, is refused.
func TestWithdrawals(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	submit := func(name string, files map[string]string) {
		t.Helper()
		b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", PayloadURL: o.objectManifest(name, "book-w", files)})
		r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	}
	submit("w1", map[string]string{"a.txt": "a", "b.txt": "b"})
	submit("w2", map[string]string{"c.txt": "c"})
	var ark string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-w'`).Scan(&ark)
	v1, v2 := r.version(ark, 1), r.version(ark, 2)
	exists := func(key string) bool {
		_, err := r.bs.Stat(ctx, key)
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	code, out := r.call("POST", "/v1/objects/withdraw", map[string]any{"ark": ark, "version": 2, "reason": "a page under copyright"})
	if code != http.StatusOK || out["object"] != false || len(out["deleted"].([]any)) != 4 {
		t.Fatalf("withdraw v2: %d %v (want c.txt and v2's 3 system files)", code, out)
	}
	if exists(v2["c.txt"]) || !exists(v2["b.txt"]) || !exists(v1["a.txt"]) {
		t.Errorf("after v2's withdrawal: c.txt %v (want gone), b.txt %v, a.txt %v (want kept)", exists(v2["c.txt"]), exists(v2["b.txt"]), exists(v1["a.txt"]))
	}
	code, out = r.call("POST", "/v1/objects/withdraw", map[string]any{"ark": ark, "reason": "the depositor's request"})
	if code != http.StatusOK || out["object"] != true || len(out["deleted"].([]any)) != 9 {
		t.Fatalf("withdraw the object: %d %v (want every stored file of both versions: 3 producer, 6 system)", code, out)
	}
	if exists(v1["a.txt"]) || exists(v1["b.txt"]) {
		t.Error("the object's files are still stored")
	}
	code, out = r.call("GET", "/v1/objects?ark="+url.QueryEscape(ark), nil)
	versions, _ := out["versions"].([]any)
	if code != http.StatusOK || out["withdrawn_reason"] != "the depositor's request" || len(versions) != 2 ||
		versions[1].(map[string]any)["withdrawn_reason"] != "a page under copyright" {
		t.Errorf("the tombstone: %d %v", code, out)
	}

	for v := 1; v <= 2; v++ {
		if !exists(inventory.Key(ark, v, withdraw.TombstoneName)) {
			t.Errorf("no tombstone of v%d in the store", v)
		}
	}

	b3 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", PayloadURL: o.objectManifest("w3", "book-w", map[string]string{"d.txt": "d"})})
	r.waitState(ingest.Batch, b3, ingest.Failed, 30*time.Second)
	job := r.jobsOf(b3)[0]
	_, st := r.call("GET", fmt.Sprintf("/v1/jobs/%d", job), nil)
	if msg, _ := st["error"].(string); !strings.Contains(msg, "withdrawn") || !strings.Contains(msg, "reinstate") {
		t.Errorf("a deposit into the withdrawn object: %v, want it failed as withdrawn", st)
	}
	if code, out := r.call("POST", "/v1/objects/reinstate", map[string]any{"ark": ark}); code != http.StatusBadRequest {
		t.Errorf("reinstate without a reason: %d %v", code, out)
	}
	if code, out := r.call("POST", "/v1/objects/reinstate", map[string]any{"ark": strings.Replace(ark, "ark:/", "ark:", 1), "reason": "cleared"}); code != http.StatusOK {
		t.Fatalf("reinstate: %d %v", code, out)
	}
	if code, out := r.call("POST", fmt.Sprintf("/v1/jobs/%d/requeue", job), nil); code != http.StatusOK {
		t.Fatalf("requeue: %d %v", code, out)
	}
	r.waitState(ingest.Job, job, ingest.Completed, 30*time.Second)
	if v3 := r.version(ark, 3); len(v3) != 1 || v3["d.txt"] == "" {
		t.Errorf("v3 after the reinstatement: %v, want d.txt alone", v3)
	}
	_, out = r.call("GET", "/v1/objects?ark="+url.QueryEscape(ark), nil)
	if _, withdrawn := out["withdrawn_at"]; withdrawn {
		t.Errorf("reinstated, the object is still withdrawn: %v", out)
	}
	if code, out := r.call("POST", "/v1/objects/reinstate", map[string]any{"ark": ark, "reason": "again"}); code != http.StatusConflict {
		t.Errorf("reinstate of an object not withdrawn: %d %v", code, out)
	}
	// A reinstatement whose register entry was lost (the curator killed
	// between its commit and the entry): asked again, the answer is 409
	// (the object is live) and the register holds it again, so that a
	// restore of the database does not undo it.
	entry := withdraw.RegisterPrefix + strings.TrimPrefix(inventory.Prefix(ark), "objects/") + "reinstated.json"
	if !exists(entry) {
		t.Fatalf("no reinstatement in the register at %s", entry)
	}
	if err := r.bs.Delete(ctx, entry); err != nil {
		t.Fatal(err)
	}
	if code, out := r.call("POST", "/v1/objects/reinstate", map[string]any{"ark": ark, "reason": "again"}); code != http.StatusConflict || !exists(entry) {
		t.Errorf("reinstate asked again after its register entry was lost: %d %v, entry there: %v", code, out, exists(entry))
	}
	for _, c := range []map[string]any{{"ark": ark}, {"ark": "ark:/99999/fk4nothere", "reason": "x"}, {"ark": "nonsense", "reason": "x"}} {
		if code, out := r.call("POST", "/v1/objects/withdraw", c); code != http.StatusBadRequest {
			t.Errorf("%v: %d %v, want 400", c, code, out)
		}
	}
}

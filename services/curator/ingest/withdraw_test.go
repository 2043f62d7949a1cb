package ingest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/curator/ingest"
)

// TestWithdrawals: withdrawing version 2 of an object deletes the files
// only it held (a file carried from version 1 stays), withdrawing the
// object deletes the rest; the inventory keeps both as tombstones with
// their reasons; a new submission of the object makes version 3 of its
// own files, the object back. A withdrawal without a reason, or of an
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

	submit("w3", map[string]string{"d.txt": "d"})
	if v3 := r.version(ark, 3); len(v3) != 1 || v3["d.txt"] == "" {
		t.Errorf("v3 after the withdrawal: %v, want d.txt alone", v3)
	}
	_, out = r.call("GET", "/v1/objects?ark="+url.QueryEscape(ark), nil)
	if _, withdrawn := out["withdrawn_at"]; withdrawn {
		t.Errorf("a new version leaves the object withdrawn: %v", out)
	}
	for _, c := range []map[string]any{{"ark": ark}, {"ark": "ark:/99999/fk4nothere", "reason": "x"}, {"ark": "nonsense", "reason": "x"}} {
		if code, out := r.call("POST", "/v1/objects/withdraw", c); code != http.StatusBadRequest {
			t.Errorf("%v: %d %v, want 400", c, code, out)
		}
	}
}

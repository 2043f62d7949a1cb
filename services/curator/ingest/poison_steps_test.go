package ingest_test

import (
	"context"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestMintAndInventoryFailuresFailTheJob: a mint that keeps failing (J10)
// and an inventory write that keeps failing (J14) retried for ever; each
// now fails its job once INGEST_MAX_ATTEMPTS are used up, with the state
// and the last error as its reason.
func TestMintAndInventoryFailuresFailTheJob(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, map[string]string{"INGEST_MAX_ATTEMPTS": "3"})
	ctx := context.Background()
	refuse := func(table string) {
		t.Helper()
		if _, err := r.db.Exec(ctx, `CREATE OR REPLACE FUNCTION curator.refuse() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'injected: % refuses writes', TG_TABLE_NAME; END $$;
			DROP TRIGGER IF EXISTS refuse ON curator.arks; DROP TRIGGER IF EXISTS refuse ON curator.inventory_objects;
			CREATE TRIGGER refuse BEFORE INSERT ON curator.`+table+` FOR EACH ROW EXECUTE FUNCTION curator.refuse()`); err != nil {
			t.Fatal(err)
		}
	}
	refuse("arks")
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/mint.txt", []byte("m")), Type: "file"},
		"gave up after 3 attempts in processing (INGEST_MAX_ATTEMPTS): mint")
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/mint2.txt", []byte("m")), Type: "file"},
		"arks refuses writes")
	refuse("inventory_objects")
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/inv.txt", []byte("i")), Type: "file"},
		"gave up after 3 attempts in recording (INGEST_MAX_ATTEMPTS): move to notify: inventory of")
}

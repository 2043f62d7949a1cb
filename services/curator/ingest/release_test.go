package ingest_test

import (
	"context"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/migrations"
)

// TestReleaseCollectionInPages: a collection with more held batches than
// one page of the release (500) is released whole, a page per
// transaction; another collection's held batches stay held.
func TestReleaseCollectionInPages(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	for _, c := range []struct {
		profile string
		n       int
	}{{"big", 1234}, {"other", 3}} {
		if _, err := db.Exec(ctx, `INSERT INTO curator.batches (submitter, profile, payload_url, type, state)
			SELECT 's', $1, 'http://example.org/x', 'file', 'held' FROM generate_series(1, $2)`, c.profile, c.n); err != nil {
			t.Fatal(err)
		}
	}
	s := ingest.NewStore(db)
	if err := s.HoldCollection(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	n, err := s.ReleaseCollection(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	var pending, held int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE profile = 'big' AND state = 'pending'), count(*) FILTER (WHERE state = 'held') FROM curator.batches`).Scan(&pending, &held); err != nil {
		t.Fatal(err)
	}
	if n != 1234 || pending != 1234 || held != 3 {
		t.Errorf("released %d, pending %d, still held %d: want 1234, 1234 and the other collection's 3", n, pending, held)
	}
}

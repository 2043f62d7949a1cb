package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestTwoJobsOfOneObjectGetTwoVersions: two deposits of one local id (one
// ARK) worked side by side both computed "versions + 1" and wrote the same
// version's files over each other, recording one version for two jobs.
// Each now gets a version number of its own (v2 and v3 of an object
// deposited once before).
func TestTwoJobsOfOneObjectGetTwoVersions(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	murl, _ := o.manifest("twin", 1) // local id twin-local-0 in every batch
	// The object exists (v1, its ARK minted); then two deposits of it.
	first := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	r.waitState(ingest.Batch, first, ingest.Completed, 30*time.Second)
	gate := make(chan struct{})
	o.mu.Lock()
	o.hang["/files/twin-000.txt"] = gate
	o.mu.Unlock()
	a := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: murl, Type: "batch-manifest"})
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE state = 'downloading'`).Scan(&n)
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs downloading, want both", n)
		}
	}
	close(gate) // both go on at once
	r.waitState(ingest.Batch, a, ingest.Completed, 30*time.Second)
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	var arks, versions, distinct, objects int
	r.db.QueryRow(ctx, `SELECT count(DISTINCT ark), count(*), count(DISTINCT version) FROM curator.jobs`).Scan(&arks, &versions, &distinct)
	r.db.QueryRow(ctx, `SELECT count(*) FROM curator.inventory_versions`).Scan(&objects)
	if arks != 1 || distinct != 3 || objects != 3 {
		t.Errorf("%d ARKs, %d jobs with %d distinct versions, %d versions recorded: want 1 ARK, 3 versions", arks, versions, distinct, objects)
	}
}

package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// TestNamesRepeatAcrossObjects: a file name must be distinct within one
// object only. A batch-manifest of two objects each with a cover.jpg, and
// a manifest of manifests whose sub-manifests are both manifest.checkm (in
// two folders), were refused whole as "corrupt manifest"; both are
// ingested, every job completed. Two files of one name in one object are
// still refused.
func TestNamesRepeatAcrossObjects(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	cover := func(dir string) string { return o.put("/"+dir+"/cover.jpg", []byte("a cover of "+dir)) }
	batch := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n" +
		cover("book-1") + " | cover.jpg | book-1\n" + cover("book-2") + " | cover.jpg | book-2\n#%eof\n"
	b1 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/batch.checkm", []byte(batch)), Type: "batch-manifest"})

	sub := func(dir string) string {
		m := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\n" + cover(dir) + " | cover.jpg\n" +
			o.put("/"+dir+"/text.txt", []byte("the text of "+dir)) + " | text.txt\n#%eof\n"
		return o.put("/"+dir+"/manifest.checkm", []byte(m))
	}
	mom := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n" +
		sub("vol-1") + " | manifest.checkm | vol-1\n" + sub("vol-2") + " | manifest.checkm | vol-2\n#%eof\n"
	b2 := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/mom.checkm", []byte(mom)), Type: "manifest-of-manifests"})

	for _, b := range []int64{b1, b2} {
		r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
		var jobs, completed int
		r.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM curator.jobs WHERE batch_id = $1`, b).Scan(&jobs, &completed)
		if jobs != 2 || completed != 2 {
			t.Errorf("batch %d: %d jobs, %d completed; want 2 completed", b, jobs, completed)
		}
	}

	twice := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName\n" + cover("one") + " | cover.jpg\n" + cover("two") + " | cover.jpg\n#%eof\n"
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: o.put("/twice.checkm", []byte(twice)), Type: "manifest"},
		fmt.Sprintf("file name %q is also on line 3", "cover.jpg"))
}

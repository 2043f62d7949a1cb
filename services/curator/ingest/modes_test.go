package ingest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
)

// objectManifest is a checkm manifest of one object's files, served by o
// under name, with an optional local identifier.
func (o *origin) objectManifest(name, localID string, files map[string]string) string {
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n")
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		u := o.put("/"+name+"/"+n, []byte(files[n]))
		fmt.Fprintf(&m, "%s | %s | %s\n", u, n, localID)
	}
	return o.put("/"+name+".checkm", []byte(m.String()))
}

// version is the producer files of an object's version: name → key.
func (r *rig) version(ark string, v int) map[string]string {
	rows, err := r.db.Query(context.Background(), `SELECT substr(path, 10), key FROM curator.inventory_files
		WHERE ark = $1 AND version = $2 AND path LIKE 'producer/%'`, ark, v)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, k string
		rows.Scan(&n, &k)
		out[n] = k
	}
	return out
}

// TestSubmissionModes: a second submission of an object (its local
// identifier) in mode add makes version 2 of the first's files and its
// own, a file of the same name replaced, the others carried (stored once,
// under version 1's key); mode update makes version 3 of its files only;
// the storage manifest of each version lists what it holds.
func TestSubmissionModes(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	submit := func(name, mode string, files map[string]string) {
		t.Helper()
		b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest", SubmissionMode: mode,
			PayloadURL: o.objectManifest(name, "book-1", files)})
		r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	}
	submit("v1", "", map[string]string{"a.txt": "a1", "b.txt": "b1"})
	var ark string
	r.db.QueryRow(ctx, `SELECT ark FROM curator.arks WHERE local_id = 'book-1'`).Scan(&ark)
	submit("v2", "add", map[string]string{"a.txt": "a2", "c.txt": "c2"})
	submit("v3", "update", map[string]string{"d.txt": "d3"})

	v1, v2, v3 := r.version(ark, 1), r.version(ark, 2), r.version(ark, 3)
	if len(v1) != 2 || len(v2) != 3 || len(v3) != 1 {
		t.Fatalf("versions' files: %v, %v, %v", v1, v2, v3)
	}
	if v2["b.txt"] != v1["b.txt"] || !strings.Contains(v2["a.txt"], "/v2/") || !strings.Contains(v2["c.txt"], "/v2/") || v3["d.txt"] == "" {
		t.Errorf("v2 %v (b.txt carried from v1 %v), v3 %v", v2, v1, v3)
	}
	body := func(key string) string {
		rc, _, err := r.bs.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var b bytes.Buffer
		b.ReadFrom(rc)
		return b.String()
	}
	if body(v2["a.txt"]) != "a2" || body(v2["b.txt"]) != "b1" {
		t.Errorf("v2: a.txt %q, b.txt %q", body(v2["a.txt"]), body(v2["b.txt"]))
	}
	var manifest string
	r.db.QueryRow(ctx, `SELECT manifest_key FROM curator.inventory_versions WHERE ark = $1 AND version = 2`, ark).Scan(&manifest)
	if m := body(manifest); !strings.Contains(m, "producer/a.txt") || !strings.Contains(m, "producer/b.txt") || !strings.Contains(m, "producer/c.txt") {
		t.Errorf("v2's storage manifest:\n%s", m)
	}
	if code, out := r.call("POST", "/v1/batches", ingest.Submission{Submitter: "t", Profile: "p", Type: "file", PayloadURL: o.put("/x", []byte("x")), SubmissionMode: "replace"}); code != http.StatusBadRequest || out["field"] != "submission_mode" {
		t.Errorf("mode replace: %d %v", code, out)
	}
}

// TestManifestOfContainersWithSuppliedARKs: each row of a manifest of
// containers is a zip, one object each, its declared digest checked; a
// row's supplied ARK (mrt:primaryIdentifier) is its object's; a supplied
// ARK on a submission of many objects is refused, and one that is not an
// ARK too.
func TestManifestOfContainersWithSuppliedARKs(t *testing.T) {
	o := newOrigin(t)
	r := newRig(t, nil)
	ctx := context.Background()
	zipOf := func(files map[string]string) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for n, body := range files {
			w, _ := zw.Create(n)
			w.Write([]byte(body))
		}
		zw.Close()
		return b.Bytes()
	}
	z1, z2 := zipOf(map[string]string{"page1.tif": "one", "page2.tif": "two"}), zipOf(map[string]string{"cover.jpg": "c"})
	m := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | mrt:localIdentifier | mrt:primaryIdentifier\n" +
		fmt.Sprintf("%s | | | %d | vol-1 | ark:/13030/m5vol1\n", o.put("/c/1.zip", z1), len(z1)) +
		fmt.Sprintf("%s | | | %d | vol-2 |\n", o.put("/c/2.zip", z2), len(z2))
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest-of-containers", PayloadURL: o.put("/containers.checkm", []byte(m))})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	arks := map[string]string{}
	rows, _ := r.db.Query(ctx, `SELECT local_id, ark FROM curator.jobs WHERE batch_id = $1`, b)
	for rows.Next() {
		var l, a string
		rows.Scan(&l, &a)
		arks[l] = a
	}
	rows.Close()
	if arks["vol-1"] != "ark:13030/m5vol1" || !strings.HasPrefix(arks["vol-2"], "ark:/99999/fk4") {
		t.Errorf("ARKs %v", arks)
	}
	if files := r.version("ark:13030/m5vol1", 1); len(files) != 2 || files["page2.tif"] == "" {
		t.Errorf("vol-1's files %v", files)
	}

	// A container whose size is not the manifest's fails its job.
	bad := "#%checkm_0.7\n#%fields | nfo:fileUrl | nfo:fileSize | mrt:localIdentifier\n" + fmt.Sprintf("%s | %d | vol-3\n", o.put("/c/3.zip", z2), len(z2)+1)
	r.failsWith(ingest.Submission{Submitter: "t", Profile: "p", Type: "manifest-of-containers", PayloadURL: o.put("/bad2.checkm", []byte(bad))}, "the manifest says")

	for _, c := range []struct {
		sub   ingest.Submission
		field string
	}{
		{ingest.Submission{Submitter: "t", Profile: "p", Type: "batch-manifest", PayloadURL: o.put("/y", nil), Primary: "ark:/13030/m5x"}, "primary"},
		{ingest.Submission{Submitter: "t", Profile: "p", Type: "file", PayloadURL: o.put("/y", nil), Primary: "doi:10.1/x"}, "primary"},
	} {
		if code, out := r.call("POST", "/v1/batches", c.sub); code != http.StatusBadRequest || out["field"] != c.field {
			t.Errorf("%+v: %d %v", c.sub, code, out)
		}
	}
}

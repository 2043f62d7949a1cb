package origin_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest/manifest"
	"github.com/archivist/archivist/services/curator/ingest/origin"
)

// TestTheOriginServesWhatItsManifestsName: every URL a manifest of
// manifests names is served, and each file with the length and MD5 its
// object's manifest declares, as ingest's own manifest reader reads them.
func TestTheOriginServesWhatItsManifestsName(t *testing.T) {
	t.Parallel()
	o := origin.New(nil)
	srv := httptest.NewServer(o)
	defer srv.Close()
	objects := []origin.Object{
		{ManifestPath: "/a/manifest.checkm", LocalID: "obj-a", Files: []origin.File{
			{Path: "/a/one.txt", Name: "one.txt", Body: []byte("one")},
			{Path: "/a/two.bin", Name: "data/two.bin", Body: bytes.Repeat([]byte{0, 1, 2}, 1000)},
		}},
		{ManifestPath: "/b/manifest.checkm", LocalID: "obj-b", Files: []origin.File{
			{Path: "/b/three.txt", Name: "three.txt", Body: []byte("three")},
		}},
	}
	top := o.AddManifestOfManifests(srv.URL, "/mom.checkm", objects)

	get := func(url string) []byte {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var subs []manifest.Row
	if err := manifest.ScanCheckm(bytes.NewReader(get(top)), manifest.DefaultLimits, func(r manifest.Row) error {
		subs = append(subs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].LocalID != "obj-a" || subs[1].Name != "manifest.checkm" {
		t.Fatalf("manifest of manifests read as %+v", subs)
	}
	files := 0
	for _, sub := range subs {
		lim := manifest.DefaultLimits
		lim.Object = true
		if err := manifest.ScanCheckm(bytes.NewReader(get(sub.URL)), lim, func(r manifest.Row) error {
			files++
			body := get(r.URL)
			sum := md5.Sum(body)
			if r.DigestAlg != "md5" || r.Digest != hex.EncodeToString(sum[:]) || r.Size != int64(len(body)) {
				t.Errorf("%s: the manifest declares %s %s, %d bytes; the origin serves md5 %x, %d bytes", r.Name, r.DigestAlg, r.Digest, r.Size, sum, len(body))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if files != 3 {
		t.Errorf("%d files read through the manifests, want 3", files)
	}

	// HEAD gives the length without the body; an unknown path is 404.
	resp, err := http.Head(srv.URL + "/a/two.bin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ContentLength != 3000 {
		t.Errorf("HEAD length %d, want 3000", resp.ContentLength)
	}
	resp, err = http.Get(srv.URL + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown path: %s, want 404", resp.Status)
	}
}

package aggregator

import (
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/blob"
)

// TestAnUnreadableClusterIsLeftOutAndSaid: a cluster whose summary is
// gone, and one whose blocks are corrupt, are left out of the answers:
// each query answers 200 from the other clusters, exactly their lines,
// and says which clusters it lacks (the header Archivist-Incomplete, a
// last JSON object); the failures are counted and the unreadable clusters
// are a gauge an alert watches; an export, which must not be partial,
// still fails.
func TestAnUnreadableClusterIsLeftOutAndSaid(t *testing.T) {
	a, bs, _, gens := clusteredAggregator(t)
	root := bs.(*blob.Local).Root()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	const q = "url=example.com&matchType=domain"
	whole, _ := cdxAnswer(t, srv, q)
	name := func(g Generation) string { return strings.TrimSuffix(path.Base(g.Key), ".idx") }
	lines := func(g Generation) map[string]bool {
		out := map[string]bool{}
		for _, l := range pywbRead(t, filepath.Join(root, filepath.FromSlash(g.Key)), "com,example", "com,example-") {
			out[l] = true
		}
		return out
	}
	// The first cluster's summary goes; every other cluster still answers.
	gone := gens[0]
	others := map[string]bool{}
	for _, g := range gens[1:] {
		for l := range lines(g) {
			others[l] = true
		}
	}
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(gone.Key))); err != nil {
		t.Fatal(err)
	}
	clear(a.clusters) // opened again, as after a restart
	var want []string
	for _, l := range strings.Split(strings.TrimRight(whole, "\n"), "\n") {
		if others[l] {
			want = append(want, l)
		}
	}
	body, h := cdxAnswer(t, srv, q)
	if got := strings.Split(strings.TrimRight(body, "\n"), "\n"); !slices.Equal(got, want) || len(want) == 0 || len(want) == strings.Count(whole, "\n") {
		t.Errorf("without cluster %s: %d lines, want the other clusters' %d (of %d)", name(gone), len(got), len(want), strings.Count(whole, "\n"))
	}
	if inc := h.Get("Archivist-Incomplete"); !strings.Contains(inc, name(gone)) {
		t.Errorf("Archivist-Incomplete %q, want it to name %s", inc, name(gone))
	}
	body, _ = cdxAnswer(t, srv, q+"&output=json&fl=urlkey")
	if last := body[strings.LastIndex(strings.TrimRight(body, "\n"), "\n")+1:]; !strings.HasPrefix(last, `{"incomplete": "the index cluster(s) `+name(gone)) {
		t.Errorf("JSON's last object %q, want it to say the answer is incomplete", last)
	}
	// A corrupt block in another cluster: left out too, from the block on.
	bad := gens[len(gens)-1]
	part := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(bad.Key, ".idx")+"-00000.cdx.gz"))
	raw, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		raw[i] ^= 0x5a
	}
	if err := os.WriteFile(part, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	clear(a.clusters)
	body, h = cdxAnswer(t, srv, q)
	var got []string
	if b := strings.TrimRight(body, "\n"); b != "" {
		got = strings.Split(b, "\n")
	}
	if inc := h.Get("Archivist-Incomplete"); !strings.Contains(inc, name(gone)) || !strings.Contains(inc, name(bad)) {
		t.Errorf("Archivist-Incomplete %q, want it to name %s and %s", inc, name(gone), name(bad))
	}
	for _, l := range got {
		if !others[l] {
			t.Fatalf("answered a line no readable cluster holds: %q", l)
		}
	}
	if a.unreadableClusters() != 2 {
		t.Errorf("%d clusters counted unreadable, want 2", a.unreadableClusters())
	}
	if _, err := a.Export(t.Context(), new(strings.Builder)); err == nil {
		t.Error("an export without a cluster succeeded: it must not be partial")
	}
}

package work_test

import (
	"encoding/json"
	"flag"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/pkg/work"
)

var update = flag.Bool("update", false, "write schemas/openapi.json")

const openAPIFile = "../../schemas/openapi.json"

// TestOpenAPI: schemas/openapi.json is the document OpenAPI makes from the
// routes (regenerate with -update); its paths are the routes Handle
// serves, and every filter field a client sends is a parameter of it.
func TestOpenAPI(t *testing.T) {
	got, err := work.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(openAPIFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got) {
		t.Errorf("%s is out of date with pkg/work: run go test ./pkg/work -run TestOpenAPI -update", openAPIFile)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Parameters []struct{ Name string } `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(got, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("not an OpenAPI 3.1 document: %v", err)
	}
	mux := http.NewServeMux()
	(&work.Store{}).Handle(mux, nil)
	for _, route := range []string{work.FindRoute, work.ActRoute, work.ActionsRoute, work.RatesRoute} {
		method, path, _ := strings.Cut(route, " ")
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("the document lacks %s", route)
			continue
		}
		if _, pattern := mux.Handler(&http.Request{Method: method, URL: mustURL(strings.ReplaceAll(path, "{verb}", "retry"))}); pattern != route {
			t.Errorf("%s is not served as %q (%q)", path, route, pattern)
		}
		if route == work.ActionsRoute || route == work.RatesRoute {
			continue
		}
		params := map[string]bool{}
		for _, p := range op.Parameters {
			params[p.Name] = true
		}
		f := work.Filter{Pipeline: "p", Kind: "k", ID: "i", States: []string{"s"}, Collection: "c", Submitter: "u", OlderThan: time.Hour, Query: "q"}
		for name := range f.Values() {
			if !params[name] {
				t.Errorf("%s: the filter's %q is no parameter of the document", route, name)
			}
		}
	}
}

func mustURL(path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		panic(err)
	}
	return u
}

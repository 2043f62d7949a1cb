package main

import (
	"os"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	"github.com/archivist/archivist/services/archivist/dev"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/curator/curator"
	"github.com/archivist/archivist/services/cwa/cwa"
	"github.com/archivist/archivist/services/indexer/indexer"
	"github.com/archivist/archivist/services/pwa/pwa"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// TestREADMEDocumentsEveryVariable keeps the README's configuration table
// complete: every environment variable a process reads is in it, with its
// default.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(readme)
	for _, cfg := range []any{&service.Common{}, &logging.Config{}, &curator.Config{}, &dev.Options{},
		&pwa.Config{}, &cwa.Config{}, &researcher.Config{}, &auditor.Config{}, &indexer.Config{}, &aggregator.Config{}} {
		for _, v := range config.Vars(cfg) {
			row := "| `" + v.Name + "` | "
			i := strings.Index(table, row)
			if i < 0 {
				t.Errorf("README's configuration table lacks %s", v.Name)
				continue
			}
			if v.Default != "" && !strings.Contains(strings.SplitN(table[i:], "\n", 2)[0], "`"+v.Default+"`") {
				t.Errorf("README gives %s a default other than %q", v.Name, v.Default)
			}
		}
	}
}

// Package refdocs writes the reference tables of the README and the docs
// from the code that defines them (the streams, the services' consumers,
// the ingest transitions, the audit outcomes, the HTTP routes, the
// metrics), into blocks marked in the
// Markdown, so that a table cannot go stale without a test saying so
// (TestReferenceTablesAreCurrent). Run `go generate ./services/archivist/refdocs`
// after changing what a table shows.
package refdocs

//go:generate go run ./gen ../../..

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/curator/ingest"
)

// Block is one generated table: the file (from the repository's root)
// whose marked block it fills, the block's name, and its content.
type Block struct {
	File, Name string
	Render     func(root string) string
}

// Blocks are the generated tables.
var Blocks = []Block{
	{"README.md", "variables", Variables},
	{"README.md", "streams", fromCode(Streams)},
	{"docs/ARCHITECTURE.md", "streams", fromCode(Streams)},
	{"docs/ARCHITECTURE.md", "consumers", fromCode(Consumers)},
	{"docs/ARCHITECTURE.md", "routes", Routes},
	{"docs/ingest.md", "transitions", fromCode(Transitions)},
	{"docs/auditor.md", "outcomes", fromCode(Outcomes)},
	{"docs/DEPLOY.md", "metrics", Metrics},
}

// Update fills every block under root; with write false it only reports
// the blocks whose content is not what the code says (stale), or whose
// markers are missing.
func Update(root string, write bool) (stale []string, err error) {
	byFile := map[string][]Block{}
	var files []string
	for _, b := range Blocks {
		if byFile[b.File] == nil {
			files = append(files, b.File)
		}
		byFile[b.File] = append(byFile[b.File], b)
	}
	for _, f := range files {
		path := filepath.Join(root, f)
		old, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		text := string(old)
		for _, b := range byFile[f] {
			begin, end := marker(b.Name), "<!-- end generated: "+b.Name+" -->"
			i := strings.Index(text, begin)
			j := strings.Index(text, end)
			if i < 0 || j < i {
				return nil, fmt.Errorf("%s: no block %q (put %q and %q around it)", f, b.Name, begin, end)
			}
			text = text[:i+len(begin)] + "\n" + b.Render(root) + text[j:]
		}
		if text == string(old) {
			continue
		}
		stale = append(stale, f)
		if write {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

// fromCode is a table that needs no file of the repository.
func fromCode(f func() string) func(string) string { return func(string) string { return f() } }

// routePattern is a route as a service registers it.
var routePattern = regexp.MustCompile(`HandleFunc\("([A-Z]+) (/[^"]*)"`)

// ServiceRoutes reads every HTTP route each service's API registers from
// the services' sources under root (each HandleFunc pattern, "GET /path";
// the work kit's routes where a service serves them), by service: what the
// routes table shows and the end-to-end authentication test checks.
func ServiceRoutes(root string) (map[string][]string, error) {
	out := map[string][]string{}
	dirs, err := os.ReadDir(filepath.Join(root, "services"))
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "archivist" {
			continue // the CLI and the dev runner serve no API of their own
		}
		svc := d.Name()
		err := filepath.WalkDir(filepath.Join(root, "services", svc), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "testdata" {
				return filepath.SkipDir
			}
			if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "work.MarkRoutes(") {
				out[svc] = append(out[svc], work.FindRoute, work.ActRoute, work.ActionsRoute, work.RatesRoute)
			}
			for _, m := range routePattern.FindAllStringSubmatch(string(b), -1) {
				out[svc] = append(out[svc], m[1]+" "+m[2])
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Routes is every HTTP route of every service's API (ServiceRoutes), a
// row each.
func Routes(root string) string {
	byService, err := ServiceRoutes(root)
	if err != nil {
		return "(the services' sources could not be read: " + err.Error() + ")\n"
	}
	var rows [][]string
	for _, svc := range slices.Sorted(maps.Keys(byService)) {
		rs := byService[svc]
		slices.SortFunc(rs, func(a, b string) int {
			_, pa, _ := strings.Cut(a, " ")
			_, pb, _ := strings.Cut(b, " ")
			return cmp.Or(strings.Compare(pa, pb), strings.Compare(a, b))
		})
		for _, r := range slices.Compact(rs) {
			method, path, _ := strings.Cut(r, " ")
			rows = append(rows, []string{svc, method, code(path)})
		}
	}
	return table([]string{"service", "method", "route"}, rows)
}

func marker(name string) string {
	return "<!-- generated: " + name + " (go generate ./services/archivist/refdocs) -->"
}

// table writes a Markdown table.
func table(head []string, rows [][]string) string {
	var b bytes.Buffer
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		for i := range r {
			r[i] = strings.ReplaceAll(r[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

func code(s string) string { return "`" + s + "`" }

func codes(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = code(s)
	}
	return strings.Join(out, ", ")
}

// age is d in the largest whole unit.
func age(d time.Duration) string {
	switch {
	case d == 0:
		return "no limit"
	case d == 24*time.Hour:
		return "1 day"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return d.String()
}

// thousands is n with its thousands separated (100,000).
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Streams is every stream: its subjects, retention and bounds, and what
// it is for.
func Streams() string {
	var rows [][]string
	for _, s := range events.Streams(1) {
		ret := map[jetstream.RetentionPolicy]string{jetstream.LimitsPolicy: "limits", jetstream.WorkQueuePolicy: "work queue",
			jetstream.InterestPolicy: "interest"}[s.Retention]
		var bounds []string
		bounds = append(bounds, "age "+age(s.MaxAge))
		if s.MaxMsgsPerSubject > 0 {
			bounds = append(bounds, thousands(s.MaxMsgsPerSubject)+" a subject")
		}
		if s.MaxMsgs > 0 {
			bounds = append(bounds, thousands(s.MaxMsgs)+" messages")
		}
		if s.MaxBytes > 0 {
			bounds = append(bounds, fmt.Sprintf("%d MiB", s.MaxBytes>>20))
		}
		if s.AllowMsgTTL {
			bounds = append(bounds, "a TTL a message")
		}
		rows = append(rows, []string{code(s.Name), codes(s.Subjects), ret, strings.Join(bounds, ", "), s.Description})
	}
	return table([]string{"stream", "subjects", "retention", "kept", "for"}, rows)
}

// Consumers is every service's durable consumers: the stream, the
// subjects, and how often a message is delivered before it is a dead
// letter.
func Consumers() string {
	var rows [][]string
	for _, svc := range events.Services {
		for _, c := range events.ConsumersOf(svc) {
			filters := c.Config.FilterSubjects
			if c.Config.FilterSubject != "" {
				filters = append([]string{c.Config.FilterSubject}, filters...)
			}
			subjects := codes(filters)
			if len(filters) == 0 {
				subjects = "all the stream's"
			}
			deliver := "unbounded"
			if c.Config.MaxDeliver > 0 {
				deliver = fmt.Sprint(c.Config.MaxDeliver)
			}
			rows = append(rows, []string{svc, code(c.Config.Durable), code(c.Stream), subjects, deliver, age(c.Config.AckWait)})
		}
	}
	return table([]string{"service", "consumer", "stream", "subjects", "deliveries", "ack wait"}, rows)
}

// Transitions is the ingest state machine: every allowed move, who makes
// it, and why.
func Transitions() string {
	var rows [][]string
	for _, t := range ingest.Transitions {
		rows = append(rows, []string{string(t.Entity), string(t.From), string(t.To), string(t.By), code(t.Action), t.Doc})
	}
	return table([]string{"entity", "from", "to", "by", "action", "when"}, rows)
}

// Outcomes is the bit-integrity outcome table as the auditor applies it.
func Outcomes() string {
	var rows [][]string
	for _, r := range integrity.Table {
		effects := make([]string, len(r.Effects))
		for i, e := range r.Effects {
			effects[i] = string(e)
		}
		rows = append(rows, []string{fmt.Sprint(r.No), string(r.Content), string(r.Provider), string(r.Index), string(r.Log),
			strings.Join(effects, "; "), r.Cause})
	}
	return table([]string{"row", "content", "provider", "index", "log", "effects", "how it happens"}, rows)
}

package curator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/catalog"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
)

// TestAWorkExplainsItself: a work of three sources (feed, log, wiki, in
// that precedence), one of whose records also names a record that does not
// link back, explains each field with the record, version and rule that
// supplied it, the links that formed its graph and the refused one; after
// a source changes its title, the explanation at the earlier time is the
// earlier one, and what changed since is that title, from the newer
// version of the same record.
func TestAWorkExplainsItself(t *testing.T) {
	h := startWith(t, map[string]string{"CURATOR_SOURCE_PRECEDENCE": "feed,log,wiki"})
	ctx := context.Background()
	at := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	publish := func(source string, ev *events.EpisodeUpserted, sent time.Time) {
		t.Helper()
		env, err := events.NewAt(source, sent, ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.bus.Publish(ctx, subjectOf(env), env); err != nil {
			t.Fatal(err)
		}
	}
	feed := episode("x", "") // no title: the next source's is taken
	feed.SameAs = []events.Ref{{Source: "log", ID: "x"}}
	feed.Priority = 1
	log := episode("x", "The log's title")
	log.SameAs = []events.Ref{{Source: "feed", ID: "x"}, {Source: "wiki", ID: "x"}}
	log.Priority = 7
	log.Media = events.Media{Key: "audio/log-x.mp3"}
	wiki := episode("x", "The wiki's title")
	wiki.SameAs = []events.Ref{{Source: "log", ID: "x"}, {Source: "feed", ID: "other"}} // feed:other never links back
	wiki.InitialCuratedAt = wiki.InitialCuratedAt.Add(-24 * time.Hour)
	publish("feed", feed, at)
	publish("log", log, at)
	publish("wiki", wiki, at)

	explain := func(query url.Values) (int, api.Explained) {
		t.Helper()
		resp, err := http.Get(h.api + "/v1/works/episodes/wiki:x/explain?" + query.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e api.Explained
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, e
	}
	var e api.Explained
	waitFor(t, "a work of three sources, explained", func() bool {
		code, got := explain(nil)
		e = got
		return code == http.StatusOK && len(got.Explanation.Members) == 3
	})
	x := e.Explanation
	if x.Key != "feed:x" || !slices.Equal(x.Precedence, []string{"feed", "log", "wiki"}) {
		t.Errorf("work %s, precedence %v; want feed:x by feed, log, wiki", x.Key, x.Precedence)
	}
	if got := []string{x.Members[0].Key, x.Members[1].Key, x.Members[2].Key}; !slices.Equal(got, []string{"feed:x", "log:x", "wiki:x"}) {
		t.Errorf("members in precedence order: %v", got)
	}
	field := func(x merger.Explanation, name string) merger.Field {
		for _, f := range x.Fields {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("no field %s in %+v", name, x.Fields)
		return merger.Field{}
	}
	for _, want := range []merger.Field{
		{Name: "title", Value: "The log's title", Record: "log:x", Rule: merger.RuleTitle},
		{Name: "media_key", Value: "audio/x.mp3", Record: "feed:x", Rule: merger.RuleMedia},
		{Name: "priority", Value: "7", Record: "log:x", Rule: merger.RulePriority},
		{Name: "initial_curated_at", Value: wiki.InitialCuratedAt.Format(time.RFC3339Nano), Record: "wiki:x", Rule: merger.RuleInitial},
	} {
		got := field(x, want.Name)
		if got.Value != want.Value || got.Record != want.Record || got.Rule != want.Rule || !got.RecordVersion.Equal(at) {
			t.Errorf("%s: %+v, want %+v at version %s", want.Name, got, want, at)
		}
	}
	for _, l := range []matcher.Link{{From: "feed:x", To: "log:x"}, {From: "log:x", To: "feed:x"}, {From: "log:x", To: "wiki:x"}, {From: "wiki:x", To: "log:x"}} {
		if !slices.Contains(x.Links, l) {
			t.Errorf("link %v missing from %v", l, x.Links)
		}
	}
	if len(x.Refused) != 1 || x.Refused[0].From != "wiki:x" || x.Refused[0].To != "feed:other" || x.Refused[0].Reason != matcher.Unreciprocated {
		t.Errorf("refused links: %+v; want wiki:x -> feed:other, unreciprocated", x.Refused)
	}

	// The log changes its title: the work now takes the new one.
	before := time.Now().UTC()
	time.Sleep(10 * time.Millisecond)
	log.Title = "The log's new title"
	publish("log", log, at.Add(time.Hour))
	waitFor(t, "the new title", func() bool {
		_, got := explain(nil)
		return field(got.Explanation, "title").Value == "The log's new title"
	})
	code, then := explain(url.Values{"at": {before.Format(time.RFC3339Nano)}})
	if code != http.StatusOK || field(then.Explanation, "title").Value != "The log's title" {
		t.Errorf("at %s: %d, title %q; want the earlier title", before, code, field(then.Explanation, "title").Value)
	}
	_, diff := explain(url.Values{"since": {before.Format(time.RFC3339Nano)}})
	want := []merger.Change{{What: "title", Before: "The log's title (log:x)", After: "The log's new title (log:x)"}}
	if diff.Since == nil || !slices.Equal(diff.Changes, want) {
		t.Errorf("changes since %s: %+v; want %+v", before, diff.Changes, want)
	} else if v := field(diff.Explanation, "title").RecordVersion; !v.Equal(at.Add(time.Hour)) {
		t.Errorf("the title's record version %s, want the newer one %s", v, at.Add(time.Hour))
	}

	// An operator splits wiki:x out of the work: versioned, kept with who
	// and why, in force over a later update of the wiki's record (which
	// still links the log's), shown in both works' explanations.
	decide := func(req api.DecisionRequest) (int, matcher.Decision) {
		t.Helper()
		body, _ := json.Marshal(req)
		resp, err := http.Post(h.api+"/v1/works/episodes/decisions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d matcher.Decision
		json.NewDecoder(resp.Body).Decode(&d)
		return resp.StatusCode, d
	}
	membersOf := func(key string) []string {
		v, err := merger.Show(ctx, h.cat.DB(), "episode", key)
		if err != nil || v.Work == nil {
			return nil
		}
		return v.Work.Members
	}
	if code, d := decide(api.DecisionRequest{Action: matcher.Split, A: "wiki:x", Reason: "a different programme with the same name"}); code != http.StatusCreated || d.ID == 0 || d.By == "" {
		t.Fatalf("split: %d %+v", code, d)
	}
	waitFor(t, "wiki:x split out", func() bool { return slices.Equal(membersOf("feed:x"), []string{"feed:x", "log:x"}) })
	wiki.Title = "The wiki's new title"
	publish("wiki", wiki, at.Add(2*time.Hour))
	h.waitRecord(t, "episode", "wiki:x", func(r catalog.Record) bool { return r.Title == "The wiki's new title" })
	waitFor(t, "wiki:x's own work, with its new title", func() bool {
		v, err := merger.Show(ctx, h.cat.DB(), "episode", "wiki:x")
		return err == nil && v.Work != nil && v.Work.Key == "wiki:x" && v.Work.Title == "The wiki's new title"
	})
	if m := membersOf("feed:x"); !slices.Equal(m, []string{"feed:x", "log:x"}) {
		t.Errorf("after the wiki's update the split held? feed:x's members %v", m)
	}
	_, split := explain(nil) // wiki:x's work now
	if x := split.Explanation; x.Key != "wiki:x" || len(x.Members) != 1 || !slices.ContainsFunc(x.Refused, func(r matcher.Refusal) bool {
		return r.From == "wiki:x" && r.To == "log:x" && strings.Contains(r.Reason, "split out by") && strings.Contains(r.Reason, "a different programme")
	}) {
		t.Errorf("wiki:x's explanation after the split: key %s, members %+v, refused %+v", x.Key, x.Members, x.Refused)
	}
	// Taken back, and merged by hand with feed:other instead.
	if code, _ := decide(api.DecisionRequest{Action: matcher.Merge, A: "wiki:x", B: "nobody:none", Reason: "r"}); code != http.StatusBadRequest {
		t.Errorf("a merge with no record: %d, want 400", code)
	}
	if code, _ := decide(api.DecisionRequest{Action: matcher.Split, A: "wiki:x"}); code != http.StatusBadRequest {
		t.Errorf("a decision without a reason: %d, want 400", code)
	}
	other := episode("other", "Another feed episode")
	publish("feed", other, at)
	h.waitRecord(t, "episode", "feed:other", func(catalog.Record) bool { return true })
	if code, d := decide(api.DecisionRequest{Action: matcher.Merge, A: "wiki:x", B: "feed:other", Reason: "the same broadcast"}); code != http.StatusCreated {
		t.Fatalf("merge: %d %+v", code, d)
	}
	waitFor(t, "wiki:x merged with feed:other", func() bool {
		return slices.Equal(membersOf("wiki:x"), []string{"feed:other", "wiki:x"}) && slices.Equal(membersOf("feed:x"), []string{"feed:x", "log:x"})
	})
	_, merged := explain(nil)
	if !slices.ContainsFunc(merged.Explanation.Links, func(l matcher.Link) bool {
		return l.From == "feed:other" && l.To == "wiki:x" && strings.Contains(l.By, "the same broadcast")
	}) {
		t.Errorf("the operator's merge is not among the links: %+v", merged.Explanation.Links)
	}
	resp, err := http.Get(h.api + "/v1/works/episodes/decisions?key=wiki:x")
	if err != nil {
		t.Fatal(err)
	}
	var history []matcher.Decision
	json.NewDecoder(resp.Body).Decode(&history)
	resp.Body.Close()
	if len(history) != 2 || history[0].Action != matcher.Split || history[1].Action != matcher.Merge || history[1].B != "wiki:x" && history[1].A != "wiki:x" {
		t.Errorf("wiki:x's decisions: %+v; want the split, then the merge", history)
	}

	// Asked before any work: a 404 that says so; a bad time: a 400.
	if code, _ := explain(url.Values{"at": {"2000-01-01T00:00:00Z"}}); code != http.StatusNotFound {
		t.Errorf("before any work: %d, want 404", code)
	}
	if code, _ := explain(url.Values{"at": {"yesterday"}}); code != http.StatusBadRequest {
		t.Errorf("at=yesterday: %d, want 400", code)
	}
}

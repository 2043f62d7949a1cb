package curator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
)

// TestSameAsGraphsAreCapped: one publisher's records, each with the most
// same-as links allowed to records that do not exist, one of them to
// another source's episode, would make that episode's work graph thousands
// of records large (every match result too big to deliver, the work never
// built). The matcher stores links only while a graph stays within
// events.MaxGraphMembers, records each refused link with its reason (shown
// with the record), and the other source's work is built; nothing is
// dead-lettered.
func TestSameAsGraphsAreCapped(t *testing.T) {
	// A trusted linker's links count without a link back: the cap is
	// what bounds them.
	h := startWith(t, map[string]string{"CURATOR_TRUSTED_LINKERS": "evil"})
	ctx := context.Background()
	publish := func(source string, ev *events.EpisodeUpserted) {
		t.Helper()
		env, err := events.New(source, ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.bus.Publish(ctx, subjectOf(env), env); err != nil {
			t.Fatal(err)
		}
	}
	publish("radio", episode("ep-1", "the victim"))
	records := events.MaxGraphMembers/events.MaxSameAs + 2
	for i := range records {
		ev := episode(fmt.Sprintf("spam-%d", i), "spam")
		for j := range events.MaxSameAs {
			ev.SameAs = append(ev.SameAs, events.Ref{Source: "ghost", ID: fmt.Sprintf("g-%d-%d", i, j)})
		}
		// Each links to the one before, and the first to the victim: one
		// graph if every link were stored.
		if i == 0 {
			ev.SameAs[0] = events.Ref{Source: "radio", ID: "ep-1"}
		} else {
			ev.SameAs[0] = events.Ref{Source: "evil", ID: fmt.Sprintf("spam-%d", i-1)}
		}
		publish("evil", ev)
		// One after another, so the graph grows to the cap exactly (a
		// full graph of 1000 then refuses the next link: the edge).
		var stored int
		waitFor(t, fmt.Sprintf("spam-%d stored", i), func() bool {
			return h.cat.DB().QueryRow(ctx, `SELECT count(*) FROM curator.episodes WHERE source = 'evil'`).Scan(&stored) == nil && stored == i+1
		})
	}
	db := h.cat.DB()
	var refused int
	waitFor(t, "every spam record matched, links refused", func() bool {
		var matched int
		db.QueryRow(ctx, `SELECT count(*) FROM curator.episodes WHERE source = 'evil'`).Scan(&matched)
		db.QueryRow(ctx, `SELECT count(DISTINCT from_key) FROM curator.match_refused`).Scan(&refused)
		return matched == records && refused > 0
	})
	var largest int
	if err := db.QueryRow(ctx, `SELECT max(n) FROM (SELECT count(*) AS n FROM curator.match_nodes GROUP BY kind, graph) g`).Scan(&largest); err != nil {
		t.Fatal(err)
	}
	if largest > events.MaxGraphMembers {
		t.Errorf("a graph of %d records, more than %d", largest, events.MaxGraphMembers)
	}
	var victim string
	waitFor(t, "the victim's work", func() bool {
		return db.QueryRow(ctx, `SELECT state FROM curator.works WHERE kind = 'episode' AND key = 'radio:ep-1'`).Scan(&victim) == nil && victim != ""
	})
	// The refusals are shown with the record that made them.
	var refuser string
	if err := db.QueryRow(ctx, `SELECT from_key FROM curator.match_refused LIMIT 1`).Scan(&refuser); err != nil {
		t.Fatal(err)
	}
	code, body := getJSON(t, h.api+"/v1/episodes/"+refuser)
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(body["refused_same_as"]), "events.MaxGraphMembers") {
		t.Errorf("%s: %d %v, want its refused links with their reason", refuser, code, body)
	}
	st, err := h.bus.JetStream().Stream(ctx, events.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	// Every match and merge done: nothing is dead-lettered late, and the
	// service stops without a merge of the capped graph in hand.
	drainBus(t, h.bus, 2*time.Minute)
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("dead letters: %+v %v", info.State, err)
	}
}

// getJSON GETs url and decodes its JSON object.
func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
	return resp.StatusCode, out
}

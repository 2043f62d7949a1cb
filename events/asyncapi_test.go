package events_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/events"
)

const asyncAPIFile = "../schemas/asyncapi.json"

// TestAsyncAPI keeps schemas/asyncapi.json equal to what events/ renders
// (-update rewrites it), and checks the document: AsyncAPI 3, a channel
// for every event type whose message's payload is a schema file of
// schemas/, and every operation on a channel of the document, each
// channel sent by someone.
func TestAsyncAPI(t *testing.T) {
	got, err := events.AsyncAPI()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(asyncAPIFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(asyncAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got) {
		t.Errorf("%s is out of date with events/: run go test ./events -run TestAsyncAPI -update", asyncAPIFile)
	}
	var doc struct {
		AsyncAPI string `json:"asyncapi"`
		Channels map[string]struct {
			Address  string                     `json:"address"`
			Messages map[string]json.RawMessage `json:"messages"`
		} `json:"channels"`
		Operations map[string]struct {
			Action  string `json:"action"`
			Channel struct {
				Ref string `json:"$ref"`
			} `json:"channel"`
		} `json:"operations"`
		Components struct {
			Messages map[string]struct {
				Name    string `json:"name"`
				Payload struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"payload"`
			} `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AsyncAPI != "3.0.0" {
		t.Errorf("asyncapi %q", doc.AsyncAPI)
	}
	types := map[string]bool{}
	for _, m := range doc.Components.Messages {
		types[m.Name] = true
		if _, err := os.Stat(filepath.Join("../schemas", m.Payload.Schema.Ref)); err != nil {
			t.Errorf("message %s: payload schema %s: %v", m.Name, m.Payload.Schema.Ref, err)
		}
	}
	for _, k := range events.Kinds() {
		if !types[k.Type] {
			t.Errorf("no message for %s", k.Type)
		}
	}
	sent, received := map[string]bool{}, map[string]bool{}
	for id, op := range doc.Operations {
		ch := strings.TrimPrefix(op.Channel.Ref, "#/channels/")
		if _, ok := doc.Channels[ch]; !ok {
			t.Errorf("operation %s on no channel %q", id, op.Channel.Ref)
		}
		if op.Action == "send" {
			sent[ch] = true
		} else {
			received[ch] = true
		}
	}
	for id, ch := range doc.Channels {
		if !sent[id] || !received[id] {
			t.Errorf("channel %s (%s): sent %v, received %v; want both", id, ch.Address, sent[id], received[id])
		}
	}
	if ch, ok := doc.Channels["curationEpisodeUpserted"]; !ok || ch.Address != "curation.{source}.episode.upserted" {
		t.Errorf("the episode channel: %+v", ch)
	}
}

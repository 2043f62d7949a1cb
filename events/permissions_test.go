package events_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/archivist/archivist/events"
)

const (
	authConf   = "../charts/archivist-nats/files/auth.conf"
	publishers = "../charts/archivist-nats/files/publishers"
)

// TestAuthConfig keeps charts/archivist-nats/files/auth.conf equal to what the declared
// access and charts/archivist-nats/files/publishers render; -update rewrites it.
func TestAuthConfig(t *testing.T) {
	text, err := os.ReadFile(publishers)
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := events.ParsePublishers(string(text))
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.AuthConfig(pubs)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(authConf), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(authConf, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(authConf)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date with events/permissions.go: run go test ./events -run TestAuthConfig -update", authConf)
	}
	for _, svc := range events.Services {
		if _, err := events.PermissionsOf(svc); err != nil {
			t.Error(err)
		}
	}
}

// TestDottedNamesCannotEscapeTheirScope (N28): a name is a token of NATS
// subjects, users and inboxes, so a '.' in it (or a wildcard, or a space)
// would reach past its scope: user "radio" subscribing to _INBOX_radio.>
// would read "radio.news"'s replies, and source "bbc.radio" would name a
// consumer "rejected-bbc" with a filter. Every place a name is made
// refuses them.
func TestDottedNamesCannotEscapeTheirScope(t *testing.T) {
	hash := "$2a$11$" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
	if _, err := events.ParsePublishers("radio radio " + hash + "\nradio-news radio-news " + hash); err != nil {
		t.Fatalf("two plain users: %v", err)
	}
	for _, line := range []string{
		"radio.news radio-news " + hash,
		"radio-news radio.news " + hash,
		"radio bbc.radio " + hash,
	} {
		if _, err := events.ParsePublishers("radio radio " + hash + "\n" + line); err == nil {
			t.Errorf("publishers line %q was taken", line)
		}
	}
	for _, name := range []string{"bbc.radio", "a*", "a>", "a b", "a\tb", "-a", ""} {
		if err := events.ValidateSource("source", name); err == nil {
			t.Errorf("source %q was taken", name)
		}
	}
	ep := events.EpisodeUpserted{Source: "bbc.radio", ID: "ep-1", Title: "t", DurationMS: 1000, InitialCuratedAt: time.Now(), LatestCuratedAt: time.Now(),
		Media: events.Media{Key: "audio/a.flac", SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}}
	if err := ep.Validate(); err == nil {
		t.Error("an episode of source bbc.radio was taken")
	}
}

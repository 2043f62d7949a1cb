package events_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/archivist/archivist/events"
)

const (
	authConf   = "../k8s/nats/auth.conf"
	publishers = "../k8s/nats/publishers"
)

// TestAuthConfig keeps k8s/nats/auth.conf equal to what the declared
// access and k8s/nats/publishers render; -update rewrites it.
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

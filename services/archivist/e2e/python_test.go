package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/services/archivist/keycmd"
	"github.com/archivist/archivist/services/curator/curator"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
)

// python is Debian's Python with python3-msgpack, which the cross-language
// test needs; .ci/run installs it where missing.
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(p, "-c", "import msgpack").Run(); err == nil {
			return p
		}
	}
	t.Fatal("the cross-language test needs Python 3 with msgpack: apt-get install python3-msgpack (.ci/run does)")
	return ""
}

// TestAPythonClientPublishes: examples/python/publish_episode.py, a client
// written with Python's standard library and python3-msgpack only (no Go
// code of ours), speaks the NATS protocol itself as the publisher user of
// the generated auth.conf: it publishes a curation event as schemas/
// documents it and gets JetStream's acknowledgement; the curator stores it.
// Over HTTP it posts with its API key (stored, as its own source) and is
// refused without one.
func TestAPythonClientPublishes(t *testing.T) {
	py := python(t)
	// Its own NATS user, as `archivist key new py-station --nats --source
	// py-station` makes it, in the users `archivist nats-auth` renders.
	password, pubLine, err := keycmd.NewPublisher("py-station", "py-station")
	if err != nil {
		t.Fatal(err)
	}
	url := securedNATSWith(t, usersConf(t, pubLine), false).url
	key, line := apiauth.NewKey("py-station", []apiauth.Role{apiauth.Publisher}, "py-station")
	// A publisher's key is no reader (N24): the records are read as staff.
	viewer, viewerLine := apiauth.NewKey("viewer", []apiauth.Role{apiauth.Reader}, "")
	keysFile := filepath.Join(t.TempDir(), "api-keys")
	if err := os.WriteFile(keysFile, []byte(line+"\n"+viewerLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: url, DBURL: testenv.DBURL(t, curatormigrations.Schema)},
		merge(as("curator"), map[string]string{"API_AUTH": "keys", "API_KEYS_FILE": keysFile, "CURATOR_HTTP_ADDR": addr}))
	run := func(args ...string) map[string]any {
		t.Helper()
		out, err := exec.Command(py, append([]string{"../../../examples/python/publish_episode.py"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("publish_episode.py %v: %v\n%s", args, err, out)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("publish_episode.py %v printed %q", args, out)
		}
		return v
	}
	hostport := strings.TrimPrefix(url, "nats://")
	got := run("nats", hostport, "py-station", password, "ep-py-nats", "py-station")
	ack, _ := got["ack"].(map[string]any)
	if ack["stream"] != "CURATION" || ack["seq"] == nil {
		t.Errorf("over NATS: %v, want JetStream's acknowledgement from CURATION", got)
	}
	if got := run("http", "http://"+addr, "", "ep-py-http"); got["status"] != float64(http.StatusUnauthorized) {
		t.Errorf("over HTTP without a key: %v, want 401", got)
	}
	if got := run("http", "http://"+addr, key, "ep-py-http"); got["status"] != float64(http.StatusAccepted) {
		t.Errorf("over HTTP with its key: %v, want 202", got)
	}
	for _, id := range []string{"py-station:ep-py-nats", "py-station:ep-py-http"} {
		waitUntil(t, 15*time.Second, id+" stored", func() bool {
			req, _ := http.NewRequest("GET", "http://"+addr+"/v1/episodes/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+viewer)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	// A wrong password is refused.
	out, err := exec.Command(py, "../../../examples/python/publish_episode.py", "nats", hostport, "py-station", "wrong", "ep-x", "py-station").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Authorization Violation") {
		t.Errorf("a wrong password: %v %s", err, out)
	}
}

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
	"github.com/archivist/archivist/services/archivist/keycmd"
	"github.com/archivist/archivist/services/curator/curator"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
)

// usersConf renders the NATS users of the services and of the curating
// systems of lines (keycmd.NewPublisher's), as `archivist nats-auth` does,
// into a file of the test's.
func usersConf(t *testing.T, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	pubs, conf := filepath.Join(dir, "publishers"), filepath.Join(dir, "auth.conf")
	if err := os.WriteFile(pubs, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rendered strings.Builder
	if err := keycmd.NATSAuth(pubs, &rendered); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(rendered.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestExamplePublishersOverMutualTLS: the publishers a curating system
// copies, examples/go/publish (nats.go) and examples/python (Python's
// standard library), each as its own NATS user of the generated users,
// speak TLS with a client certificate to a server that requires one (as
// deployed), take replies in their own inbox prefix, send a message id
// and check JetStream's acknowledgement: their episodes are stored. One
// that publishes as another source gets no acknowledgement and says so
// (exit 1); a plain connection to the TLS-only server is refused.
func TestExamplePublishersOverMutualTLS(t *testing.T) {
	py := python(t)
	goPW, goLine, err := keycmd.NewPublisher("go-sys", "go-station")
	if err != nil {
		t.Fatal(err)
	}
	pyPW, pyLine, err := keycmd.NewPublisher("py-sys", "py-station")
	if err != nil {
		t.Fatal(err)
	}
	sec := securedNATSWith(t, usersConf(t, goLine, pyLine), true)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	env := merge(merge(as("curator"), sec.tlsEnv()), map[string]string{"CURATOR_HTTP_ADDR": addr})
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: sec.url, DBURL: testenv.DBURL(t, curatormigrations.Schema)}, env)

	goPublish := func(source string) (string, error) {
		cmd := exec.Command("go", "run", "../../../examples/go/publish", "-url", sec.url, "-user", "go-sys", "-password", goPW,
			"-ca", sec.ca.File, "-cert", sec.certFile, "-key", sec.keyFile, "-source", source, "-episode", "ep-go")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := goPublish("go-station")
	if err != nil {
		t.Fatalf("the Go example: %v\n%s", err, out)
	}
	var ack struct {
		Event, Stream string
		Seq           uint64
	}
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &ack); err != nil || ack.Stream != "CURATION" || ack.Seq == 0 {
		t.Errorf("the Go example printed %q (%v), want CURATION's acknowledgement", out, err)
	}
	if out, err := goPublish("py-station"); err == nil || !strings.Contains(out, "not stored") {
		t.Errorf("the Go example as another source: %v %s, want it refused", err, out)
	}

	hostport := strings.TrimPrefix(sec.url, "tls://")
	runPy := func(url string) (string, error) {
		cmd := exec.Command(py, "../../../examples/python/publish_episode.py", "nats", url, "py-sys", pyPW, "ep-py", "py-station")
		cmd.Env = append(os.Environ(), "NATS_CA="+sec.ca.File, "NATS_CERT="+sec.certFile, "NATS_KEY="+sec.keyFile)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err = runPy("tls://" + hostport)
	if err != nil || !strings.Contains(out, `"stream": "CURATION"`) {
		t.Errorf("the Python example over TLS: %v %s", err, out)
	}
	if out, err := runPy(hostport); err == nil || !strings.Contains(out, "requires TLS") {
		t.Errorf("the Python example without TLS: %v %s, want it refused", err, out)
	}

	for _, id := range []string{"go-station:ep-go", "py-station:ep-py"} {
		waitUntil(t, 30*time.Second, id+" stored", func() bool {
			resp, err := http.Get("http://" + addr + "/v1/episodes/" + id)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}

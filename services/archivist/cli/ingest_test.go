package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/archivist/cli"
	"github.com/archivist/archivist/services/curator/curator"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSubmitWaitStatusAndRefusal: `batch submit --wait` follows a 3-file
// batch to completed with a progress bar; `job status` prints the history;
// an action the table does not allow is refused with the reason.
func TestSubmitWaitStatusAndRefusal(t *testing.T) {
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/m.checkm" {
			fmt.Fprintf(w, "#%%checkm_0.7\nhttp://%s/a.txt\nhttp://%s/b.txt\nhttp://%s/c.txt\n#%%eof\n", r.Host, r.Host, r.Host)
			return
		}
		fmt.Fprintf(w, "content of %s", r.URL.Path)
	}))
	defer files.Close()
	port := testenv.FreePort(t)
	testenv.StartService(t, curator.Definition(), map[string]string{"CURATOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port),
		"INGEST_ALLOW_PRIVATE": "true", "INGEST_MIN_FREE_BYTES": "1048576", "INGEST_WORK_DIR": t.TempDir(), "INGEST_INTERVAL": "100ms"})
	t.Setenv("ARCHIVIST_CURATOR_URL", fmt.Sprintf("http://127.0.0.1:%d", port))
	ctx := context.Background()
	var out, errOut bytes.Buffer
	err := cli.Run(ctx, []string{"batch", "submit", "--profile", "p", "--payload", files.URL + "/m.checkm", "--type", "batch-manifest", "--wait"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "batch 1 [########################################] 3/3 completed") ||
		!strings.Contains(out.String(), "reporting -> completed") {
		t.Errorf("submit --wait printed:\n%s", out.String())
	}
	out.Reset()
	if err := cli.Run(ctx, []string{"job", "status", "2"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "job 2") || !strings.Contains(out.String(), "notify -> completed") || !strings.Contains(out.String(), "ark:/99999/fk4") {
		t.Errorf("job status:\n%s", out.String())
	}
	err = cli.Run(ctx, []string{"job", "requeue", "2"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "job 2 is completed: requeue is allowed only from failed") {
		t.Errorf("requeue of a completed job: %v", err)
	}
	// Lists by state: the batch's three completed jobs, no failed ones, and
	// a state the table does not know refused.
	out.Reset()
	if err := cli.Run(ctx, []string{"job", "list", "--state", "completed", "--batch", "1"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), " completed "); n != 3 || !strings.Contains(out.String(), "LOCAL ID") {
		t.Errorf("job list --state completed (%d rows):\n%s", n, out.String())
	}
	out.Reset()
	if err := cli.Run(ctx, []string{"batch", "list", "--state", "failed"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "(none)") {
		t.Errorf("batch list --state failed: %v\n%s", err, out.String())
	}
	if err := cli.Run(ctx, []string{"job", "list", "--state", "sleeping"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "not a job state") {
		t.Errorf("job list --state sleeping: %v", err)
	}
	err = cli.Run(ctx, []string{"batch", "submit", "--profile", "p", "--payload", "ftp://x/y", "--type", "file"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "payload_url: an http or https URL") {
		t.Errorf("bad payload: %v", err)
	}
}

package apiclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/pkg/reply"
)

// TestACallAndTheServicesAnswers: a call presents the token and sends its
// body as JSON; a 2xx answer is decoded; a 4xx written the services' one
// way (reply.Error) comes back as a StatusError with the service's
// message, and a non-JSON one with its text.
func TestACallAndTheServicesAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			reply.JSON(w, http.StatusOK, map[string]string{"auth": r.Header.Get("Authorization"), "type": r.Header.Get("Content-Type"), "body": string(b)})
		case "/bad":
			reply.Error(w, http.StatusBadRequest, "state: \"x\" is no state")
		default:
			http.Error(w, "plain failure", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	var got map[string]string
	if err := apiclient.DoAs(ctx, srv.Client(), "ak_1", "curator", http.MethodPost, srv.URL+"/ok", map[string]int{"n": 1}, &got); err != nil {
		t.Fatal(err)
	}
	if got["auth"] != "Bearer ak_1" || got["type"] != "application/json" || got["body"] != `{"n":1}` {
		t.Errorf("the call as the service saw it: %v", got)
	}
	err := apiclient.DoAs(ctx, srv.Client(), "", "curator", http.MethodGet, srv.URL+"/bad", nil, nil)
	var se *apiclient.StatusError
	if !errors.As(err, &se) || se.Code != 400 || se.Message != `state: "x" is no state` || !strings.HasPrefix(err.Error(), "curator: 400 Bad Request: ") {
		t.Errorf("a 400: %v", err)
	}
	err = apiclient.DoAs(ctx, srv.Client(), "", "pwa", http.MethodGet, srv.URL+"/else", nil, nil)
	if !errors.As(err, &se) || se.Code != 502 || se.Message != "plain failure" {
		t.Errorf("a 502 in plain text: %v", err)
	}
}

// TestTheTokenTheCLIPresents: ARCHIVIST_TOKEN, else the file
// ARCHIVIST_TOKEN_FILE names, else the one under ARCHIVIST_DATA_DIR; none
// is "".
func TestTheTokenTheCLIPresents(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ARCHIVIST_TOKEN", "")
	t.Setenv("ARCHIVIST_TOKEN_FILE", "")
	t.Setenv("ARCHIVIST_DATA_DIR", dir)
	if tok := apiclient.Token(); tok != "" {
		t.Fatalf("no token anywhere: %q", tok)
	}
	os.WriteFile(filepath.Join(dir, "api.token"), []byte("ak_dev\n"), 0o600)
	if tok := apiclient.Token(); tok != "ak_dev" {
		t.Fatalf("the dev kit's: %q", tok)
	}
	file := filepath.Join(dir, "other")
	os.WriteFile(file, []byte("ak_file"), 0o600)
	t.Setenv("ARCHIVIST_TOKEN_FILE", file)
	if tok := apiclient.Token(); tok != "ak_file" {
		t.Fatalf("the named file's: %q", tok)
	}
	t.Setenv("ARCHIVIST_TOKEN", "ak_env")
	if tok := apiclient.Token(); tok != "ak_env" {
		t.Fatalf("the variable's: %q", tok)
	}
}

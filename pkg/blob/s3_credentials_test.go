package blob_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/blobtest"
	"github.com/archivist/archivist/pkg/blob"
)

// keyChecker lets through only requests signed with a known access key,
// and remembers the last one, in front of an S3 server that does not check.
type keyChecker struct {
	next  http.Handler
	known map[string]bool
	mu    sync.Mutex
	last  string
}

var credentialRE = regexp.MustCompile(`Credential=([^/]+)/`)

func (k *keyChecker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil || !k.known[m[1]] {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>unknown key</Message></Error>`)
		return
	}
	k.mu.Lock()
	k.last = m[1]
	k.mu.Unlock()
	k.next.ServeHTTP(w, r)
}

// TestS3CredentialsChain: without static keys the store takes its
// credentials from the platform: the AWS variables, or a web identity
// exchanged at STS (EKS IRSA: a projected token file and a role), each
// seen by the server as the signing key.
func TestS3CredentialsChain(t *testing.T) {
	ctx := context.Background()
	s3 := &keyChecker{next: blobtest.NewS3Handler(blobtest.S3Options{}).Handler, known: map[string]bool{"key": true, "ENVKEY": true, "ASIAIRSA": true}}
	srv := httptest.NewServer(s3)
	defer srv.Close()
	endpoint := strings.TrimPrefix(srv.URL, "http://")
	if err := makeBucket(ctx, endpoint, "creds"); err != nil {
		t.Fatal(err)
	}
	var stsCalls []string
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		stsCalls = append(stsCalls, r.Form.Get("Action")+" "+r.Form.Get("RoleArn")+" "+r.Form.Get("WebIdentityToken"))
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>ASIAIRSA</AccessKeyId><SecretAccessKey>irsa-secret</SecretAccessKey><SessionToken>irsa-session</SessionToken>
<Expiration>%s</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	defer sts.Close()
	url := "s3://creds/archive?endpoint=" + endpoint + "&secure=false&path_style=true&region=us-east-1&sts_endpoint=" + sts.URL
	// Nothing of this machine's own credentials may leak in.
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY", "AWS_SECRET_KEY",
		"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	put := func(what string) {
		t.Helper()
		st, err := blob.Open(ctx, blob.Config{URL: url})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, err := st.Put(ctx, "x", strings.NewReader(what), nil); err != nil {
			t.Fatalf("%s: put: %v", what, err)
		}
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	put("the AWS variables")
	if s3.last != "ENVKEY" {
		t.Errorf("with the AWS variables the server saw key %q", s3.last)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("projected-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/archivist")
	put("a web identity")
	if s3.last != "ASIAIRSA" {
		t.Errorf("with a web identity the server saw key %q", s3.last)
	}
	if len(stsCalls) == 0 || stsCalls[0] != "AssumeRoleWithWebIdentity arn:aws:iam::123456789012:role/archivist projected-token" {
		t.Errorf("STS calls: %q", stsCalls)
	}

	// Static keys win over the chain; a key the server does not know fails
	// at open, naming the bucket.
	if _, err := blob.Open(ctx, blob.Config{URL: url, S3AccessKeyID: "stranger", S3SecretAccessKey: "x"}); err == nil || !strings.Contains(err.Error(), "creds") {
		t.Errorf("an unknown static key: %v", err)
	}
}

package identifier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// EZIDClient speaks EZID's HTTP API (https://ezid.cdlib.org/doc/apidoc):
// mint an identifier in a shoulder, create one with metadata, modify its
// metadata, read it. Requests carry HTTP Basic credentials; bodies are
// ANVL. A refusal (a 4xx but 408 and 429) is permanent; anything else
// (5xx, a network fault) may pass and is transient.
type EZIDClient struct {
	// Base is EZID's URL, e.g. https://ezid.cdlib.org.
	Base string
	// User and Password are the account's (INGEST_EZID_USER,
	// INGEST_EZID_PASSWORD).
	User, Password string
	// HTTP is the client requests go through (default: a client with a
	// one-minute timeout).
	HTTP *http.Client
}

// ErrExists is EZID's answer to a create of an identifier it has.
var ErrExists = errors.New("ezid: identifier already exists")

// ErrNoSuchIdentifier is EZID's answer about an identifier it does not have.
var ErrNoSuchIdentifier = errors.New("ezid: no such identifier")

// Mint mints a new identifier in shoulder (e.g. ark:/99999/fk4) with
// metadata and returns it.
func (c *EZIDClient) Mint(ctx context.Context, shoulder string, meta map[string]string) (string, error) {
	body, err := c.call(ctx, http.MethodPost, "/shoulder/"+escapeID(shoulder), meta)
	if err != nil {
		return "", fmt.Errorf("ezid mint in %s: %w", shoulder, err)
	}
	id, _, _ := strings.Cut(body, " | ") // a DOI's answer names its shadow ARK after a bar
	return strings.TrimSpace(id), nil
}

// Create creates identifier id with metadata; ErrExists if EZID has it.
func (c *EZIDClient) Create(ctx context.Context, id string, meta map[string]string) error {
	if _, err := c.call(ctx, http.MethodPut, "/id/"+escapeID(id), meta); err != nil {
		return fmt.Errorf("ezid create %s: %w", id, err)
	}
	return nil
}

// Update sets metadata elements of identifier id (the others are kept).
func (c *EZIDClient) Update(ctx context.Context, id string, meta map[string]string) error {
	if _, err := c.call(ctx, http.MethodPost, "/id/"+escapeID(id), meta); err != nil {
		return fmt.Errorf("ezid update %s: %w", id, err)
	}
	return nil
}

// Get reads identifier id's metadata (its reserved elements, _owner
// among them, included); ErrNoSuchIdentifier if EZID does not have it.
func (c *EZIDClient) Get(ctx context.Context, id string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.Base, "/")+"/id/"+escapeID(id), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, fmt.Errorf("ezid get %s: %w", id, err)
	}
	defer resp.Body.Close()
	meta, err := DecodeANVL(resp.Body, 1<<20)
	if err != nil {
		return nil, fault.Transient(fmt.Errorf("ezid get %s: %w", id, err))
	}
	if _, ok := meta["success"]; ok && resp.StatusCode == http.StatusOK {
		delete(meta, "success")
		return meta, nil
	}
	return nil, fmt.Errorf("ezid get %s: %w", id, answerError(resp.StatusCode, meta["error"]))
}

// call sends meta as ANVL and returns the text after "success:".
func (c *EZIDClient) call(ctx context.Context, method, path string, meta map[string]string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, strings.NewReader(EncodeANVL(meta)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
	resp, err := c.do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fault.Transient(err)
	}
	first, _, _ := strings.Cut(string(text), "\n")
	if rest, ok := strings.CutPrefix(first, "success:"); ok && resp.StatusCode/100 == 2 {
		return strings.TrimSpace(rest), nil
	}
	reason, _ := strings.CutPrefix(first, "error:")
	return "", answerError(resp.StatusCode, strings.TrimSpace(reason))
}

// do sends req with the account's credentials.
func (c *EZIDClient) do(req *http.Request) (*http.Response, error) {
	req.SetBasicAuth(c.User, c.Password)
	req.Header.Set("Accept", "text/plain")
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fault.Transient(err)
	}
	return resp, nil
}

// answerError is EZID's refusal as an error: ErrExists and
// ErrNoSuchIdentifier by their reasons, any other 4xx (but 408, 429)
// permanent, the rest transient.
func answerError(code int, reason string) error {
	if reason == "" {
		reason = http.StatusText(code)
	}
	err := fmt.Errorf("EZID answered %d: %s", code, reason)
	switch {
	case strings.Contains(reason, "already exists"):
		return fmt.Errorf("%w (%v)", ErrExists, err)
	case code == http.StatusNotFound || strings.Contains(reason, "no such identifier"):
		return fault.Permanent(fmt.Errorf("%w (%v)", ErrNoSuchIdentifier, err))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return fault.Permanent(err)
	}
	return fault.Transient(err)
}

// escapeID is an identifier as a path of EZID's API: its characters kept
// but those a URL path cannot hold.
func escapeID(id string) string {
	return (&url.URL{Path: id}).EscapedPath()
}

// CheckEZIDURL checks EZID's base URL: http(s), and https but for a
// stand-in on this machine, since Basic credentials go with every request.
func CheckEZIDURL(base string) error {
	if err := manifest.CheckURL(base); err != nil {
		return err
	}
	u, _ := url.Parse(base)
	host := u.Hostname()
	ip := net.ParseIP(host)
	if u.Scheme != "https" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New("EZID is asked over https (its password goes with every request)")
	}
	return nil
}

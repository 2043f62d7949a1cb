// Package apiclient is the JSON-over-HTTP calls to the services' APIs, of
// the CLI and of the dashboard: one way to ask, and one way to report what
// a service said.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Token is the API key the CLI presents: ARCHIVIST_TOKEN, else the file
// ARCHIVIST_TOKEN_FILE names, else the one `archivist dev` wrote under its
// data dir (ARCHIVIST_DATA_DIR, default .archivist); "" when there is none.
func Token() string {
	if v := os.Getenv("ARCHIVIST_TOKEN"); v != "" {
		return v
	}
	file := os.Getenv("ARCHIVIST_TOKEN_FILE")
	if file == "" {
		dir := os.Getenv("ARCHIVIST_DATA_DIR")
		if dir == "" {
			dir = ".archivist"
		}
		file = filepath.Join(dir, "api.token")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Get fetches url and decodes its JSON into out. service names the service
// in errors.
func Get(ctx context.Context, service, url string, out any) error {
	return Do(ctx, service, http.MethodGet, url, nil, out)
}

// Post sends body as JSON to url and decodes the JSON answer into out.
func Post(ctx context.Context, service, url string, body, out any) error {
	return Do(ctx, service, http.MethodPost, url, body, out)
}

// Do makes one call with the CLI's Token. A non-2xx answer is an error
// carrying the status and the service's message.
func Do(ctx context.Context, service, method, url string, body, out any) error {
	return DoAs(ctx, http.DefaultClient, Token(), service, method, url, body, out)
}

// DoAs makes one call with client, presenting token ("" for none): a
// service asking another on its caller's behalf. An answer is read up to
// 64 MiB.
func DoAs(ctx context.Context, client *http.Client, token, service, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("ask the %s: %w", service, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var p struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &p) == nil && p.Error != "" {
			msg = p.Error
		}
		return &StatusError{Service: service, Code: resp.StatusCode, Status: resp.Status, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("read the %s's answer: %w", service, err)
	}
	return nil
}

// StatusError is a service's non-2xx answer.
type StatusError struct {
	// Service names the service asked.
	Service string
	// Code and Status are the HTTP status ("404 Not Found").
	Code   int
	Status string
	// Message is the service's error message.
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Service, e.Status, e.Message)
}

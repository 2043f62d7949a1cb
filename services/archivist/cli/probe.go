package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func probeCmd() *cobra.Command {
	var o probeOptions
	c := &cobra.Command{
		Use:   "probe [--ca FILE] [--key-optional] URL...",
		Short: "GET each URL and fail unless it answers 200 (helm test's check of an install)",
		Long: `GET each URL (with the API key of ARCHIVIST_TOKEN, if set) and fail unless
every one answers 200 within --timeout: the services' /readyz on their
admin ports, a CDX query at the aggregator. --ca checks https URLs against
that CA (the APIs' own). With --key-optional and no ARCHIVIST_TOKEN, a 401
counts as an answer (the route is served and refuses callers without a
key). The chart's helm test runs it.` + env("ARCHIVIST_TOKEN  the API key presented"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("takes one URL or more")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.token = os.Getenv("ARCHIVIST_TOKEN")
			return probe(c.Context(), o, args, c.OutOrStdout())
		},
	}
	f := c.Flags()
	f.StringVar(&o.ca, "ca", "", "the CA https URLs' certificates are checked against (else the system's)")
	f.BoolVar(&o.keyOptional, "key-optional", false, "without ARCHIVIST_TOKEN, take a 401 as an answer")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long each URL has to answer")
	return c
}

type probeOptions struct {
	ca, token   string
	keyOptional bool
	timeout     time.Duration
}

// probe GETs every URL and reports each; an error names every one that
// did not answer 200 (or 401 without a key, where that is taken).
func probe(ctx context.Context, o probeOptions, urls []string, out io.Writer) error {
	client := &http.Client{Timeout: o.timeout}
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return fmt.Errorf("probe: the CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("probe: %s holds no PEM certificate", o.ca)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	var failed []string
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return usagef("%q: %v", u, err)
		}
		if o.token != "" {
			req.Header.Set("Authorization", "Bearer "+o.token)
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(out, "FAIL %s: %v\n", u, err)
			failed = append(failed, u)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			fmt.Fprintf(out, "ok   %s\n", u)
		case resp.StatusCode == http.StatusUnauthorized && o.keyOptional && o.token == "":
			fmt.Fprintf(out, "ok   %s (401 without a key: served, and it refuses callers without one)\n", u)
		default:
			fmt.Fprintf(out, "FAIL %s: %s %s\n", u, resp.Status, strings.TrimSpace(string(body)))
			failed = append(failed, u)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("probe: %d of %d did not answer: %s", len(failed), len(urls), strings.Join(failed, ", "))
	}
	return nil
}

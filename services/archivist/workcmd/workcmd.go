// Package workcmd is `archivist work`: the archive's work across the
// pipelines (ingest jobs and batches, research episodes, archive files
// being indexed, audit requests, repairs and checks, the collections'
// mails), found with one filter and acted on with one set of verbs, through
// each service's work routes (pkg/work).
package workcmd

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/work"
)

// Client reaches every service that holds work, at the URLs the CLI's
// environment names (ARCHIVIST_CURATOR_URL, ARCHIVIST_PWA_URL,
// ARCHIVIST_INDEXER_URL, ARCHIVIST_AUDITOR_URL) or their defaults.
func Client() *work.Client {
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	return &work.Client{Endpoints: work.Endpoints(env("ARCHIVIST_CURATOR_URL", "http://127.0.0.1:8080"), env("ARCHIVIST_PWA_URL", "http://127.0.0.1:8081"),
		env("ARCHIVIST_AUDITOR_URL", "http://127.0.0.1:8082"), env("ARCHIVIST_INDEXER_URL", "http://127.0.0.1:8083"))}
}

// ParseRef reads one item's reference, pipeline/kind/id (ingest/job/12,
// index/file/warcs/a.warc.gz), as a filter naming it.
func ParseRef(ref string) (work.Filter, error) {
	parts := strings.SplitN(ref, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return work.Filter{}, fmt.Errorf("%q is not an item (pipeline/kind/id, as find lists it: ingest/job/12)", ref)
	}
	return work.Filter{Pipeline: parts[0], Kind: parts[1], ID: parts[2]}, nil
}

// PrintPage writes a page of items for a person, and how to ask for the
// next one.
func PrintPage(w io.Writer, p work.Page, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tSTATE\tSINCE\tATTEMPTS\tSUBMITTER\tCOLLECTION\tVERBS\tREASON")
	for _, it := range p.Items {
		verbs := make([]string, len(it.Verbs))
		for i, v := range it.Verbs {
			verbs[i] = string(v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%d\t%s\t%s\t%s\t%s\n", it.Ref(), it.State, now.Sub(it.MovedAt).Round(time.Second), it.Attempts,
			dash(it.Submitter), dash(it.Collection), dash(strings.Join(verbs, ",")), clip(it.Reason, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Items) == 0 {
		_, err := fmt.Fprintln(w, "(no work matches)")
		return err
	}
	if p.Next != "" {
		_, err := fmt.Fprintf(w, "more: --after %s\n", p.Next)
		return err
	}
	return nil
}

// PrintCount writes a dry run's count for a person, with how to act on it.
func PrintCount(w io.Writer, c work.Count, again string) error {
	kinds := make([]string, 0, len(c.ByKind))
	for k := range c.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "%s would move %d item(s)", c.Verb, c.N)
	if len(kinds) > 0 {
		parts := make([]string, len(kinds))
		for i, k := range kinds {
			parts[i] = fmt.Sprintf("%s %d", k, c.ByKind[k])
		}
		fmt.Fprintf(w, ": %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	for _, s := range c.Sample {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if c.N > len(c.Sample) {
		fmt.Fprintf(w, "  ... and %d more\n", c.N-len(c.Sample))
	}
	if c.N > 0 {
		_, err := fmt.Fprintf(w, "to act: %s --confirm %d\n", again, c.N)
		return err
	}
	return nil
}

// PrintRates writes the queues' flow for a person.
func PrintRates(w io.Writer, rs []work.Rates) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tIN/MIN\tOUT/MIN\tBACKLOG\tDRAINS IN")
	for _, r := range rs {
		in := "-"
		if r.In != nil {
			in = fmt.Sprintf("%.1f", r.InPerMinute())
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%.1f\t%d\t%s\n", r.Pipeline, r.Kind, in, r.OutPerMinute(), r.Backlog, r.Drain())
	}
	return tw.Flush()
}

// PrintActions writes what actions did, for a person.
func PrintActions(w io.Writer, as []work.Action) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tAT\tACTOR\tVERB\tFILTER\tCOUNTED\tMOVED\tOUTCOME")
	for _, a := range as {
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", a.Service, a.ID, a.At.UTC().Format(time.RFC3339), a.Actor, a.Verb,
			dash(a.Filter.Values().Encode()), a.Counted, a.Moved, clip(a.Outcome, 80))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip keeps s to one line of at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return dash(s)
}

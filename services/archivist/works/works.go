// Package works is `archivist works`: the operator's view of merged works,
// read from the curator's API.
package works

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/matcher"
	"github.com/archivist/archivist/services/curator/merger"
)

// Fetch reads the view of key (a "source:id" record key) from the curator
// at base (e.g. http://127.0.0.1:8080).
func Fetch(ctx context.Context, base, kind, key string) (merger.View, error) {
	var v merger.View
	u, err := worksURL(base, kind, url.PathEscape(key))
	if err == nil {
		err = apiclient.Get(ctx, "curator", u, &v)
	}
	return v, err
}

// worksURL is the curator's URL of rest under kind's works.
func worksURL(base, kind, rest string) (string, error) {
	if kind != "episode" && kind != "clip" {
		return "", fmt.Errorf("kind %q: want episode or clip", kind)
	}
	return strings.TrimRight(base, "/") + "/v1/works/" + kind + "s/" + rest, nil
}

const stamp = "2006-01-02T15:04:05.000000Z"

// Print writes a view for a person.
func Print(w io.Writer, v merger.View) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	a := v.Asked
	switch {
	case v.Work == nil:
		fmt.Fprintf(tw, "%s %s is %s (version %s): no source record is left in its graph\n", a.Kind, a.Key, a.State, a.Version.Format(stamp))
	case a.State == "redirect":
		fmt.Fprintf(tw, "%s %s was merged into %s (version %s)\n\n", a.Kind, a.Key, a.RedirectTo, a.Version.Format(stamp))
	}
	if wk := v.Work; wk != nil {
		fmt.Fprintf(tw, "WORK\t%s %s\n", wk.Kind, wk.Key)
		fmt.Fprintf(tw, "version\t%s\t(the matcher's time)\n", wk.Version.Format(stamp))
		fmt.Fprintf(tw, "title\t%s\n", wk.Title)
		fmt.Fprintf(tw, "media\t%s\t%s\n", wk.Media.Key, orDash(wk.Media.SHA256))
		fmt.Fprintf(tw, "duration\t%s\tpriority %d\n", time.Duration(wk.DurationMS)*time.Millisecond, wk.Priority)
		fmt.Fprintf(tw, "curated\t%s\tto %s\n", wk.InitialCuratedAt.Format(time.RFC3339), wk.LatestCuratedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "\nGRAPH\tMATCHED AT\n")
	for _, n := range v.Graph {
		at := "-"
		if n.MatchedAt != nil {
			at = n.MatchedAt.UTC().Format(stamp)
		}
		fmt.Fprintf(tw, "%s\t%s\n", n.Key, at)
	}
	fmt.Fprintf(tw, "\nSOURCE RECORD\tVERSION\tPRODUCER\tTITLE\tSAME AS\n")
	for _, s := range v.Sources {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Key(), s.Version.Format(stamp), s.Producer, s.Title, orDash(strings.Join(s.SameAs, " ")))
	}
	if len(v.Redirects) > 0 {
		fmt.Fprintf(tw, "\nREDIRECT\tTO\tVERSION\n")
		for _, r := range v.Redirects {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Key, r.RedirectTo, r.Version.Format(stamp))
		}
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FetchExplained reads why key's work is what it is, at at (zero: now) and,
// when since is not zero, what changed since.
func FetchExplained(ctx context.Context, base, kind, key string, at, since time.Time) (api.Explained, error) {
	q := url.Values{}
	if !at.IsZero() {
		q.Set("at", at.UTC().Format(time.RFC3339Nano))
	}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	var e api.Explained
	u, err := worksURL(base, kind, url.PathEscape(key)+"/explain?"+q.Encode())
	if err == nil {
		err = apiclient.Get(ctx, "curator", u, &e)
	}
	return e, err
}

// PrintExplained writes an explanation for a person: each field with its
// record, version and rule; the members in precedence order; the links and
// refused links; and, asked with a time since, what changed.
func PrintExplained(w io.Writer, e api.Explained) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	x := e.Explanation
	fmt.Fprintf(tw, "WORK\t%s %s\tversion %s (the matcher's time)\n", x.Kind, x.Key, x.Version.Format(stamp))
	fmt.Fprintf(tw, "precedence\t%s\n", orDash(strings.Join(x.Precedence, ", ")))
	fmt.Fprintf(tw, "\nFIELD\tVALUE\tFROM\tRECORD VERSION\tRULE\n")
	for _, f := range x.Fields {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Name, orDash(f.Value), f.Record, f.RecordVersion.Format(stamp), f.Rule)
	}
	fmt.Fprintf(tw, "\nMEMBER\tSOURCE\tVERSION\tEVENT\n")
	for _, m := range x.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Key, m.Source, m.Version.Format(stamp), m.EventID)
	}
	fmt.Fprintf(tw, "\nLINK\tTO\n")
	for _, l := range x.Links {
		fmt.Fprintf(tw, "%s\t%s\n", l.From, l.To)
	}
	if len(x.Refused) > 0 {
		fmt.Fprintf(tw, "\nREFUSED LINK\tTO\tWHY\n")
		for _, r := range x.Refused {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.From, r.To, r.Reason)
		}
	}
	if e.Since != nil {
		fmt.Fprintf(tw, "\nSINCE version %s\n", e.Since.Version.Format(stamp))
		if len(e.Changes) == 0 {
			fmt.Fprintf(tw, "nothing changed\n")
		} else {
			fmt.Fprintf(tw, "CHANGED\tBEFORE\tAFTER\n")
			for _, c := range e.Changes {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.What, orDash(c.Before), orDash(c.After))
			}
		}
	}
	return tw.Flush()
}

// Decide sends an operator's decision (merge, unmerge, split, unsplit) to
// the curator at base; the decision as recorded comes back.
func Decide(ctx context.Context, base, kind string, req api.DecisionRequest) (matcher.Decision, error) {
	var d matcher.Decision
	u, err := worksURL(base, kind, "decisions")
	if err == nil {
		err = apiclient.Post(ctx, "curator", u, req, &d)
	}
	return d, err
}

// PrintDecision writes a recorded decision for a person.
func PrintDecision(w io.Writer, d matcher.Decision) error {
	what := d.A
	if d.B != "" {
		what += " and " + d.B
	}
	_, err := fmt.Fprintf(w, "%s %s: %s, decision %d by %s at %s (%s); the graph is matched again and its works rewritten\n",
		d.Kind, what, d.Action, d.ID, d.By, d.At.Format(stamp), d.Reason)
	return err
}

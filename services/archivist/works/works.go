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
	"github.com/archivist/archivist/services/curator/merger"
)

// Fetch reads the view of key (a "source:id" record key) from the curator
// at base (e.g. http://127.0.0.1:8080).
func Fetch(ctx context.Context, base, kind, key string) (merger.View, error) {
	if kind != "episode" && kind != "clip" {
		return merger.View{}, fmt.Errorf("kind %q: want episode or clip", kind)
	}
	var v merger.View
	err := apiclient.Get(ctx, "curator", strings.TrimRight(base, "/")+"/v1/works/"+kind+"s/"+url.PathEscape(key), &v)
	return v, err
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

// Package researchcmd is `archivist research status`: the research state,
// read from the pwa's API.
package researchcmd

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/work"
)

// Fetch reads the status from the pwa at base.
func Fetch(ctx context.Context, base string) (research.Status, error) {
	var st research.Status
	err := apiclient.Get(ctx, "pwa", strings.TrimRight(base, "/")+"/v1/research/status", &st)
	return st, err
}

// Print writes the status for a person.
func Print(w io.Writer, st research.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "EPISODES\tcomplete %d\tin progress %d\twaiting %d\tparked %d\tdone with failed clips %d\n",
		st.Episodes.Complete, st.Episodes.InProgress, st.Episodes.Waiting, st.Episodes.Parked, st.Episodes.WithFailedClips)
	fmt.Fprintf(tw, "CLIPS\t%d\tresults stored %d\n", st.Clips, st.Results)
	fmt.Fprintf(tw, "QUEUE\t%d waiting\tresearchers live %d\n", st.QueueDepth, st.Researchers)
	fmt.Fprintf(tw, "\nACTIVE LEASE\tEPISODE\tCLIPS\tEXPIRES IN\n")
	for _, l := range st.Leases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.ID, l.Episode, l.Clips, l.ExpiresAt.Sub(now).Round(time.Second))
	}
	if len(st.Leases) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	if len(st.Parked) > 0 {
		fmt.Fprintf(tw, "\nPARKED EPISODE\tSINCE\tREASON (archivist research release EPISODE)\n")
		for _, p := range st.Parked {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Episode, p.At.Format(time.RFC3339), p.Reason)
		}
	}
	if len(st.Retrying) > 0 {
		fmt.Fprintf(tw, "\nRETRYING\tCLIP\tFAILURES\tNEXT ATTEMPT IN\tLAST ERROR\n")
		for _, r := range st.Retrying {
			clip := r.Clip
			if clip == "" {
				clip = "(the episode)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Episode, clip, r.Failures, r.NextAt.Sub(now).Round(time.Second), r.Reason)
		}
	}
	if len(st.FailedClips) > 0 {
		fmt.Fprintf(tw, "\nFAILED CLIP\tEPISODE\tREASON\n")
		for _, p := range st.FailedClips {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Clip, p.Episode, p.Reason)
		}
	}
	return tw.Flush()
}

// Release releases a parked episode at the pwa at base (release), or has
// its failed clips researched again (retry): the work kit's verb on
// research/episode/EPISODE.
func Release(ctx context.Context, base, episode string, v work.Verb) error {
	_, err := work.At(work.PWA, base).ActOn(ctx, v, work.Filter{Pipeline: "research", Kind: "episode", ID: episode})
	return err
}

// Redo has an episode researched again at the pwa at base: all its clips
// (action "redo"). It returns how many results were forgotten.
func Redo(ctx context.Context, base, episode, action string) (int, error) {
	var out struct {
		Forgot int `json:"results_forgotten"`
	}
	err := apiclient.Post(ctx, "pwa", strings.TrimRight(base, "/")+"/v1/research/episodes/"+url.PathEscape(episode)+"/"+action, nil, &out)
	return out.Forgot, err
}

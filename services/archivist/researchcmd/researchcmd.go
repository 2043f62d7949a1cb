// Package researchcmd is `archivist research status`: the research state,
// read from the pwa's API.
package researchcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/services/archivist/apiclient"
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
	fmt.Fprintf(tw, "EPISODES\tcomplete %d\tin progress %d\twaiting %d\n", st.Episodes.Complete, st.Episodes.InProgress, st.Episodes.Waiting)
	fmt.Fprintf(tw, "CLIPS\t%d\tresults stored %d\n", st.Clips, st.Results)
	fmt.Fprintf(tw, "QUEUE\t%d waiting\tresearchers live %d\n", st.QueueDepth, st.Researchers)
	fmt.Fprintf(tw, "\nACTIVE LEASE\tEPISODE\tCLIPS\tEXPIRES IN\n")
	for _, l := range st.Leases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.ID, l.Episode, l.Clips, l.ExpiresAt.Sub(now).Round(time.Second))
	}
	if len(st.Leases) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	return tw.Flush()
}

// Package researchcmd is `archivist research status`: the research state,
// read from the pwa's API.
package researchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/research"
)

// Fetch reads the status from the pwa at base.
func Fetch(ctx context.Context, base string) (research.Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/research/status", nil)
	if err != nil {
		return research.Status{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return research.Status{}, fmt.Errorf("ask the pwa at %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return research.Status{}, fmt.Errorf("pwa: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var st research.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return research.Status{}, fmt.Errorf("read the pwa's answer: %w", err)
	}
	return st, nil
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

// Package indexcmd is `archivist index`: the indexing status (the indexer's
// files and the aggregator's generations) and resets of parked files,
// through the two services' APIs.
package indexcmd

import (
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	"github.com/archivist/archivist/services/indexer/registry"
)

// Status reads the indexer's status.
func Status(ctx context.Context, base string) (registry.Status, error) {
	var st registry.Status
	err := apiclient.Get(ctx, "indexer", strings.TrimRight(base, "/")+"/v1/index/status", &st)
	return st, err
}

// Generations reads the aggregator's current generations.
func Generations(ctx context.Context, base string) ([]aggregator.Generation, error) {
	var gens []aggregator.Generation
	err := apiclient.Get(ctx, "aggregator", strings.TrimRight(base, "/")+"/v1/index/generations", &gens)
	return gens, err
}

// Reset makes a failed, parked or indexed file due again (indexed from
// the start): the work kit's requeue of index/file/FILE at the indexer at
// base.
func Reset(ctx context.Context, base, file string) error {
	_, err := work.At(work.Indexer, base).ActOn(ctx, work.Requeue, work.Filter{Pipeline: "index", Kind: "file", ID: file})
	return err
}

// Print writes the status for a person: files by status, freshness, the
// index's clusters (or why they could not be read, genErr) and parked files.
func Print(w io.Writer, st registry.Status, gens []aggregator.Generation, genErr error, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	states := make([]string, 0, len(st.ByStatus))
	for s := range st.ByStatus {
		states = append(states, s)
	}
	sort.Strings(states)
	fmt.Fprintf(tw, "FILES")
	for _, s := range states {
		fmt.Fprintf(tw, "\t%s %d", s, st.ByStatus[s])
	}
	fmt.Fprintf(tw, "\nCDX LINES\t%d\n", st.Lines)
	if st.OldestUnindexed != nil {
		fmt.Fprintf(tw, "FRESHNESS\toldest unindexed file found %s ago\n", now.Sub(*st.OldestUnindexed).Round(time.Second))
	} else {
		fmt.Fprintf(tw, "FRESHNESS\tevery file indexed\n")
	}
	fmt.Fprintf(tw, "\nCLUSTER\tLEVEL\tLINES\tBLOCKS\tBYTES\tOUTPUTS\tBUILT\n")
	if genErr != nil {
		fmt.Fprintf(tw, "(aggregator unreachable: %v)\n", genErr)
	}
	for _, g := range gens {
		built := "never"
		if !g.BuiltAt.IsZero() && g.BuiltAt.Year() > 1970 {
			built = now.Sub(g.BuiltAt).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", strings.TrimSuffix(path.Base(g.Key), ".idx"), g.Level, g.Lines, g.Blocks, g.Bytes, g.Sources, built)
	}
	fmt.Fprintf(tw, "\nPARKED FILE\tFAILURES\tLAST ERROR\n")
	for _, f := range st.Parked {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", f.Name, f.Failures, f.LastError)
	}
	if len(st.Parked) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	return tw.Flush()
}

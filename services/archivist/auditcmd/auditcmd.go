// Package auditcmd is `archivist audit`: the bit-integrity status and
// on-demand checks, through the auditor's API.
package auditcmd

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/integrity"
)

// Status reads the auditor's status.
func Status(ctx context.Context, base string) (auditor.Status, error) {
	var st auditor.Status
	err := apiclient.Get(ctx, "auditor", strings.TrimRight(base, "/")+"/v1/audit/status", &st)
	return st, err
}

// Check queues on-demand checks of an object or a space; it returns how many.
func Check(ctx context.Context, base, object, space string, light bool) (int, error) {
	var out map[string]int
	err := apiclient.Post(ctx, "auditor", strings.TrimRight(base, "/")+"/v1/audit/check",
		map[string]any{"object": object, "space": space, "light": light}, &out)
	return out["queued"], err
}

// Parked lists the objects whose check failed three times.
func Parked(ctx context.Context, base string) ([]auditor.ParkedObject, error) {
	var p []auditor.ParkedObject
	err := apiclient.Get(ctx, "auditor", strings.TrimRight(base, "/")+"/v1/audit/parked?limit=10000", &p)
	return p, err
}

// Resolutions lists the open resolution tasks (all of them with all).
func Resolutions(ctx context.Context, base string, all bool) ([]auditor.Resolution, error) {
	state := "open"
	if all {
		state = "all"
	}
	var res []auditor.Resolution
	err := apiclient.Get(ctx, "auditor", strings.TrimRight(base, "/")+"/v1/audit/resolutions?limit=10000&state="+state, &res)
	return res, err
}

// Close closes an open resolution task (its object is checked again).
func Close(ctx context.Context, base string, id int64) error {
	return apiclient.Post(ctx, "auditor", fmt.Sprintf("%s/v1/audit/resolutions/%d/close", strings.TrimRight(base, "/"), id), nil, nil)
}

// Repair repairs an internally resolvable task: the object's good copy
// back from the secondary store (row 2), or its audit log item from the
// content index (row 6).
func Repair(ctx context.Context, base string, id int64) (*integrity.Repaired, error) {
	var out integrity.Repaired
	err := apiclient.Post(ctx, "auditor", fmt.Sprintf("%s/v1/audit/resolutions/%d/repair", strings.TrimRight(base, "/"), id), nil, &out)
	return &out, err
}

// PrintParked writes the parked objects for a person.
func PrintParked(w io.Writer, p []auditor.ParkedObject) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OBJECT\tPARKED\tREASON\n")
	for _, o := range p {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Object, o.ParkedAt.Format("2006-01-02 15:04"), o.Reason)
	}
	if len(p) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	return tw.Flush()
}

// PrintResolutions writes resolution tasks for a person.
func PrintResolutions(w io.Writer, res []auditor.Resolution) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tOBJECT\tKIND\tROW\tSTATE\tOPENED\tREASON\n")
	for _, r := range res {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Object, r.Kind, r.Row, r.State, r.CreatedAt.Format("2006-01-02 15:04"), r.Reason)
	}
	if len(res) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	return tw.Flush()
}

// Print writes the status for a person.
func Print(w io.Writer, st auditor.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OBJECTS\t%d scheduled\tchecked this cycle (%s) %d\n", st.Objects, st.Cycle, st.CheckedThisCycle)
	if st.CycleEnds != nil {
		fmt.Fprintf(tw, "CYCLE\tthe last object of this cycle is due %s\n", st.CycleEnds.Format("2006-01-02 15:04"))
	}
	fmt.Fprintf(tw, "QUEUES\thigh %d\tlow %d\n", st.QueuedHigh, st.QueuedLow)
	fmt.Fprintf(tw, "BIT ERRORS\t%d\n", st.BitErrors)
	fmt.Fprintf(tw, "RESOLUTION TASKS\tinternal %d\texternal %d\n", st.OpenResolutions["internal"], st.OpenResolutions["external"])
	fmt.Fprintf(tw, "AUDIT QUEUE\t%d\t(%d parked: kept failing, each with its last error)\n", st.AuditQueue, st.AuditQueueParked)
	fmt.Fprintf(tw, "REPAIRS PARKED\t%d\t(automatic repairs that kept failing: archivist audit repair TASK)\n", st.RepairsParked)
	fmt.Fprintf(tw, "PARKED\t%d\t(archivist audit parked)\n", st.Parked)
	fmt.Fprintf(tw, "NO PROVIDER CHECKSUM\t%d\t(objects the store keeps no checksum of: audited by content, index and log)\n", st.NoProviderChecksum)
	fmt.Fprintf(tw, "DEAD LETTERS\t%d\n", st.DeadLetters)
	if c := st.SecondCopy; c != nil {
		end := "not yet known"
		if !c.ProjectedEnd.IsZero() {
			end = c.ProjectedEnd.Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "SECOND COPY\tchecked %d of %d this pass (pass %d, since %s)\tends %s\tcopied back this cycle %d\n",
			c.Checked, c.Objects, c.Passes+1, c.PassStarted.Format("2006-01-02 15:04"), end, c.Repaired)
	}
	rows := make([]string, 0, len(st.FailuresByRow))
	for r := range st.FailuresByRow {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		return len(rows[i]) < len(rows[j]) || len(rows[i]) == len(rows[j]) && rows[i] < rows[j]
	})
	fmt.Fprintf(tw, "\nFAILURES BY ROW\tTHIS CYCLE\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "row %s\t%d\n", r, st.FailuresByRow[r])
	}
	if len(rows) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	return tw.Flush()
}

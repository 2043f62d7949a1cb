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

	"github.com/archivist/archivist/services/archivist/apiclient"
	"github.com/archivist/archivist/services/auditor/auditor"
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

// Print writes the status for a person.
func Print(w io.Writer, st auditor.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OBJECTS\t%d scheduled\tchecked this cycle (%s) %d\n", st.Objects, st.Cycle, st.CheckedThisCycle)
	fmt.Fprintf(tw, "QUEUES\thigh %d\tlow %d\n", st.QueuedHigh, st.QueuedLow)
	fmt.Fprintf(tw, "BIT ERRORS\t%d\n", st.BitErrors)
	fmt.Fprintf(tw, "RESOLUTION TASKS\tinternal %d\texternal %d\n", st.OpenResolutions["internal"], st.OpenResolutions["external"])
	fmt.Fprintf(tw, "AUDIT QUEUE\t%d\n", st.AuditQueue)
	fmt.Fprintf(tw, "DEAD LETTERS\t%d\n", st.DeadLetters)
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

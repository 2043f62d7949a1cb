package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/services/archivist/auditcmd"
)

func auditCmd() *cobra.Command {
	var base string
	c := &cobra.Command{
		Use:   "audit",
		Short: "Bit integrity: the audit's progress, failures and resolution tasks",
		Long: "Bit integrity: objects checked this cycle, failures by row, open resolution tasks, the audit queue, dead letters; and the operator's checks and closings." +
			env("ARCHIVIST_AUDITOR_URL  the auditor's API (default http://127.0.0.1:8082)", "ARCHIVIST_TOKEN        the API key presented (else .archivist/api.token)"),
	}
	c.PersistentFlags().StringVar(&base, "auditor", envOr("ARCHIVIST_AUDITOR_URL", "http://127.0.0.1:8082"), "the auditor's API (ARCHIVIST_AUDITOR_URL)")

	status := &cobra.Command{Use: "status [--json]", Short: "The audit's progress and failures", Args: cobra.NoArgs}
	statusJSON := jsonFlag(status)
	status.RunE = func(c *cobra.Command, _ []string) error {
		st, err := auditcmd.Status(c.Context(), base)
		return show(safeOut(c), st, err, *statusJSON, auditcmd.Print)
	}

	parked := &cobra.Command{Use: "parked [--json]", Short: "Objects whose check failed three times", Args: cobra.NoArgs}
	parkedJSON := jsonFlag(parked)
	parked.RunE = func(c *cobra.Command, _ []string) error {
		p, err := auditcmd.Parked(c.Context(), base)
		return show(safeOut(c), p, err, *parkedJSON, auditcmd.PrintParked)
	}

	var all bool
	resolutions := &cobra.Command{Use: "resolutions [--all] [--json]", Short: "Resolution tasks (open ones, or --all)", Args: cobra.NoArgs}
	resolutions.Flags().BoolVar(&all, "all", false, "closed tasks too")
	resJSON := jsonFlag(resolutions)
	resolutions.RunE = func(c *cobra.Command, _ []string) error {
		res, err := auditcmd.Resolutions(c.Context(), base, all)
		return show(safeOut(c), res, err, *resJSON, auditcmd.PrintResolutions)
	}

	closeCmd := &cobra.Command{
		Use:   "close TASK",
		Short: "Close a resolution task; a check of its object is queued",
		Args:  oneID("resolution task id"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := auditcmd.Close(c.Context(), base, id(args)); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "resolution task %d closed; a check of its object is queued\n", id(args))
			return err
		},
	}

	repair := &cobra.Command{
		Use:   "repair TASK",
		Short: "Repair an internally resolvable task: good bytes back from the secondary store, or the audit log item again",
		Args:  oneID("resolution task id"),
		RunE: func(c *cobra.Command, args []string) error {
			res, err := auditcmd.Repair(c.Context(), base, id(args))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(safeOut(c), "resolution task %d: %s (%s, row %d); a check of it is queued\n", id(args), res.Action, res.Object, res.Row)
			return err
		},
	}

	var space string
	var light bool
	check := &cobra.Command{
		Use:   "check (OBJECT | --space PREFIX) [--light]",
		Short: "Queue high-priority checks now",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 || (len(args) == 1) == (space != "") {
				return usagef("takes one OBJECT or --space PREFIX")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			object := ""
			if len(args) == 1 {
				object = args[0]
			}
			n, err := auditcmd.Check(c.Context(), base, object, space, light)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "queued %d high-priority checks\n", n)
			return err
		},
	}
	check.Flags().StringVar(&space, "space", "", "check every object whose key starts with this prefix")
	check.Flags().BoolVar(&light, "light", false, "compare checksums without reading the content")

	c.AddCommand(status, parked, resolutions, closeCmd, repair, check)
	return c
}

package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/services/archivist/batchcmd"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/notify"
)

// curatorEnv is the help's environment of the commands that call the
// curator.
var curatorEnv = env("ARCHIVIST_CURATOR_URL  the curator's API (default http://127.0.0.1:8080)",
	"ARCHIVIST_TOKEN        the API key presented (else .archivist/api.token)")

func batchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "batch",
		Short: "Submit batches, follow them, act on them",
		Long:  "Submit batches of objects to ingest, follow them, and act on them.\n\n" + batchcmd.Transitions() + curatorEnv,
	}
	c.AddCommand(submitCmd(), statusCmd("batch"), listCmd("batch"))
	for _, a := range []string{"release", "delete", "update-reporting"} {
		c.AddCommand(actCmd("batch", a, a))
	}
	return c
}

func jobCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "job",
		Short: "Follow jobs and act on them",
		Long:  "Follow the jobs of batches (one per object) and act on them.\n\n" + batchcmd.Transitions() + curatorEnv,
	}
	c.AddCommand(statusCmd("job"), listCmd("job"))
	for _, a := range []string{"hold", "release", "requeue", "delete"} {
		c.AddCommand(actCmd("job", a, a))
	}
	// retry: every pipeline's retry verb (docs/RELIABILITY.md).
	c.AddCommand(actCmd("job", "retry", "requeue"))
	return c
}

func submitCmd() *cobra.Command {
	var s ingest.Submission
	var wait bool
	c := &cobra.Command{
		Use:   "submit --profile P --payload URL --type TYPE [flags]",
		Short: "Submit a batch",
		Long:  "Submit a batch: its payload is read, and a job made per object.\n\ntypes: " + strings.Join(ingest.Types, ", ") + curatorEnv,
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			base := batchcmd.Base()
			id, err := batchcmd.Submit(c.Context(), base, s)
			if err != nil {
				return err
			}
			out := safeOut(c)
			fmt.Fprintf(out, "batch %d submitted\n", id)
			if !wait {
				return nil
			}
			return batchcmd.Follow(c.Context(), base, id, out, 200*time.Millisecond)
		},
	}
	f := c.Flags()
	f.StringVar(&s.Profile, "profile", "", "the collection (profile)")
	f.StringVar(&s.PayloadURL, "payload", "", "the payload URL")
	f.StringVar(&s.Type, "type", "", strings.Join(ingest.Types, ", "))
	f.StringVar(&s.Submitter, "submitter", "", "the depositor an operator submits for (default: the API key's holder; a publisher deposits only as itself)")
	f.StringVar(&s.Title, "title", "", "title (ERC what)")
	f.StringVar(&s.Creator, "creator", "", "creator (ERC who)")
	f.StringVar(&s.Date, "date", "", "date (ERC when)")
	f.StringVar(&s.CallbackURL, "callback", "", "URL told of each job's end, and sent the batch's report")
	f.StringVar(&s.Primary, "primary", "", "the object's ARK, supplied (a submission of one object: file, container, manifest)")
	f.StringVar(&s.SubmissionMode, "mode", "add", "a new version of an object that exists: add (to the previous version's files) or update (the submitted files only)")
	f.BoolVar(&wait, "wait", false, "follow the batch with a progress bar until it ends")
	for _, name := range []string{"profile", "payload", "type"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}

func statusCmd(what string) *cobra.Command {
	c := &cobra.Command{
		Use:   "status ID [--json]",
		Short: fmt.Sprintf("Show a %s: its state, history and report", what),
		Args:  oneID(what + " id"),
	}
	asJSON := jsonFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		st, err := batchcmd.Status(c.Context(), batchcmd.Base(), what, id(args))
		return show(safeOut(c), st, err, *asJSON, batchcmd.Print)
	}
	return c
}

func listCmd(what string) *cobra.Command {
	var state string
	var limit int
	var batch int64
	c := &cobra.Command{
		Use:   "list [--state S] [--limit N] [--json]",
		Short: fmt.Sprintf("List %s, the newest first", batchcmd.Plural(what)),
		Args:  cobra.NoArgs,
		RunE:  nil,
	}
	asJSON := jsonFlag(c)
	c.Flags().StringVar(&state, "state", "", "only those in this state (failed, held, ...)")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many, the newest first")
	if what == "job" {
		c.Use = "list [--state S] [--batch ID] [--limit N] [--json]"
		c.Flags().Int64Var(&batch, "batch", 0, "only this batch's")
	}
	c.RunE = func(c *cobra.Command, _ []string) error {
		items, err := batchcmd.List(c.Context(), batchcmd.Base(), what, state, batch, limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(safeOut(c), items)
		}
		return batchcmd.PrintList(safeOut(c), what, items)
	}
	return c
}

// actCmd is an operator's action on a batch or job; name is the verb the
// command line says, action the API's.
func actCmd(what, name, action string) *cobra.Command {
	short := fmt.Sprintf("%s a %s (as the transition table allows)", strings.ToUpper(name[:1])+name[1:], what)
	if name != action {
		short = fmt.Sprintf("%s a %s: %s it", strings.ToUpper(name[:1])+name[1:], what, action)
	}
	var yes bool
	c := &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Args:  oneID(what + " id"),
		RunE: func(c *cobra.Command, args []string) error {
			to, err := batchcmd.Act(c.Context(), batchcmd.Base(), what, id(args), action, yes)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(safeOut(c), "%s %d is %s\n", what, id(args), to)
			return err
		},
	}
	if what == "job" && action == "delete" {
		c.Flags().BoolVar(&yes, "yes", false, "confirm deleting a job of a batch not yet reported (no report will tell of it)")
	}
	return c
}

func collectionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "collection",
		Short: "Hold or release a collection's batches and jobs",
		Long:  "Hold a collection: its pending batches and jobs wait; release it: they go on." + curatorEnv,
	}
	for _, a := range []string{"hold", "release"} {
		c.AddCommand(&cobra.Command{
			Use:   a + " PROFILE",
			Short: strings.ToUpper(a[:1]) + a[1:] + " a collection",
			Args:  exactly(1, "one PROFILE"),
			RunE: func(c *cobra.Command, args []string) error {
				n, err := batchcmd.Collection(c.Context(), batchcmd.Base(), args[0], a)
				if err != nil {
					return err
				}
				if a == "hold" {
					_, err = fmt.Fprintf(safeOut(c), "collection %s held\n", args[0])
				} else {
					_, err = fmt.Fprintf(safeOut(c), "collection %s released (%d batches and jobs back to pending)\n", args[0], n)
				}
				return err
			},
		})
	}
	return c
}

func ingestCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "ingest",
		Short: "Pause, resume and clean up the ingest queue",
		Long:  "Pause or resume the whole ingest queue (work in hand finishes), clean up completed batches, show the transition table." + curatorEnv,
	}
	for _, a := range []string{"pause", "resume"} {
		c.AddCommand(&cobra.Command{
			Use:   a,
			Short: strings.ToUpper(a[:1]) + a[1:] + " the whole ingest queue",
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				if err := batchcmd.Queue(c.Context(), batchcmd.Base(), a); err != nil {
					return err
				}
				_, err := fmt.Fprintf(c.OutOrStdout(), "ingest queue %sd\n", a)
				return err
			},
		})
	}
	var older time.Duration
	cleanup := &cobra.Command{
		Use:   "cleanup [--older-than 24h]",
		Short: "Delete the batches completed longer ago than --older-than",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			n, err := batchcmd.Cleanup(c.Context(), batchcmd.Base(), older)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%d completed batches deleted\n", n)
			return err
		},
	}
	cleanup.Flags().DurationVar(&older, "older-than", 24*time.Hour, "completed this long ago")
	transitions := &cobra.Command{
		Use:   "transitions [--json]",
		Short: "Show the transition table: every move, who makes it, and why",
		Args:  cobra.NoArgs,
	}
	asJSON := jsonFlag(transitions)
	transitions.RunE = func(c *cobra.Command, _ []string) error {
		if *asJSON {
			return printJSON(c.OutOrStdout(), ingest.Transitions)
		}
		_, err := fmt.Fprint(c.OutOrStdout(), batchcmd.Transitions())
		return err
	}
	c.AddCommand(cleanup, transitions)
	return c
}

func profileCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "profile",
		Short: "A collection's notifications: mail addresses, confirmation, report, callback",
		Long:  "A collection's (profile's) notification settings: the addresses mailed a confirmation when a batch is queued and its report when it ends, and the callback URL of batches that name none." + curatorEnv,
	}
	list := &cobra.Command{Use: "list [--json]", Short: "Every collection's settings that were set", Args: cobra.NoArgs}
	listJSON := jsonFlag(list)
	list.RunE = func(c *cobra.Command, _ []string) error {
		l, err := batchcmd.Profiles(c.Context(), batchcmd.Base())
		return show(safeOut(c), l, err, *listJSON, batchcmd.PrintProfiles)
	}
	showCmd := &cobra.Command{Use: "show PROFILE [--json]", Short: "A collection's settings", Args: exactly(1, "one PROFILE")}
	showJSON := jsonFlag(showCmd)
	showCmd.RunE = func(c *cobra.Command, args []string) error {
		st, err := batchcmd.Profile(c.Context(), batchcmd.Base(), args[0])
		if err != nil {
			return err
		}
		if *showJSON {
			return printJSON(safeOut(c), st)
		}
		return batchcmd.PrintProfiles(safeOut(c), []notify.Settings{*st})
	}
	var st notify.Settings
	set := &cobra.Command{
		Use:   "set PROFILE [--email ADDRESS]... [--callback URL] [--confirm=false] [--report=false]",
		Short: "Set a collection's settings (those not given are cleared or on)",
		Args:  exactly(1, "one PROFILE"),
		RunE: func(c *cobra.Command, args []string) error {
			st.Profile = args[0]
			if err := batchcmd.SetProfile(c.Context(), batchcmd.Base(), st); err != nil {
				return err
			}
			return batchcmd.PrintProfiles(safeOut(c), []notify.Settings{st})
		},
	}
	set.Flags().StringArrayVar(&st.Emails, "email", nil, "an address mailed about the collection's batches (repeat for more)")
	set.Flags().StringVar(&st.CallbackURL, "callback", "", "the callback of batches that name none")
	set.Flags().BoolVar(&st.Confirm, "confirm", true, "mail a confirmation when a batch is queued")
	set.Flags().BoolVar(&st.Report, "report", true, "mail the batch's report when it ends")
	c.AddCommand(list, showCmd, set)
	return c
}

func objectCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "object",
		Short: "Objects of the inventory: show one, withdraw one or a version of it, reinstate one",
		Long:  "Objects of the inventory: show one with its versions (withdrawn ones as tombstones), withdraw one or a version of it, reinstate a withdrawn one. An ARK may be given in any spelling of it (ark:/NAAN/NAME or ark:NAAN/NAME, hyphens or not)." + curatorEnv,
	}
	showCmd := &cobra.Command{Use: "show ARK [--json]", Short: "An object and its versions", Args: exactly(1, "one ARK")}
	asJSON := jsonFlag(showCmd)
	showCmd.RunE = func(c *cobra.Command, args []string) error {
		o, err := batchcmd.Object(c.Context(), batchcmd.Base(), args[0])
		return show(safeOut(c), o, err, *asJSON, batchcmd.PrintObject)
	}
	var reason string
	var version int
	withdrawCmd := &cobra.Command{
		Use:   "withdraw ARK [--version N] --reason TEXT",
		Short: "Withdraw an object, or one version: its files leave the store and the index, a tombstone stays",
		Long: `Withdraw an object, or one version of it (--version N): the withdrawal is
recorded with its reason; a tombstone of each withdrawn version stays in
the store; the files no other version holds are announced deleted
(archive.object.deleted: the audit's next check of each is row 11, a WARC's
lines leave the CDX index) and deleted from the store; the inventory keeps
the object as a tombstone. A job storing a version of the object is waited
for. A withdrawn object takes no deposit until it is reinstated. Asked
again, it finishes what a crash left.` + curatorEnv,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("takes one ARK (the version with --version N)")
			}
			if version < 0 {
				return usagef("--version is a version number (0 or none: every version)")
			}
			if strings.TrimSpace(reason) == "" {
				return usagef("needs --reason: the tombstone says why")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			res, err := batchcmd.Withdraw(c.Context(), batchcmd.Base(), args[0], version, reason)
			if err != nil {
				return err
			}
			what := "the object is withdrawn"
			if !res.Object {
				what = fmt.Sprintf("version %d is withdrawn", version)
			}
			_, err = fmt.Fprintf(safeOut(c), "%s: %s; %d files no other version holds deleted\n", res.ARK, what, len(res.Deleted))
			return err
		},
	}
	withdrawCmd.Flags().StringVar(&reason, "reason", "", "why (kept on the tombstone)")
	withdrawCmd.Flags().IntVar(&version, "version", 0, "the version withdrawn (none: every version, the object)")
	var why string
	reinstateCmd := &cobra.Command{
		Use:   "reinstate ARK --reason TEXT",
		Short: "Let a withdrawn object take deposits again (its withdrawn versions stay withdrawn)",
		Long: `Reinstate a withdrawn object: its next deposit makes a new version (the
versions withdrawn stay withdrawn, their files gone). A deposit into a
withdrawn object fails until then, saying so; requeue it after.` + curatorEnv,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("takes one ARK")
			}
			if strings.TrimSpace(why) == "" {
				return usagef("needs --reason: the record says why")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o, err := batchcmd.Reinstate(c.Context(), batchcmd.Base(), args[0], why)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(safeOut(c), "%s: reinstated; its next deposit makes version %d or later\n", o.ARK, len(o.Versions)+1)
			return err
		},
	}
	reinstateCmd.Flags().StringVar(&why, "reason", "", "why (kept with the withdrawals)")
	c.AddCommand(showCmd, withdrawCmd, reinstateCmd)
	return c
}

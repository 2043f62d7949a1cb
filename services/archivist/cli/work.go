package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/archivist/workcmd"
)

// workEnv is the help's environment of `archivist work`.
var workEnv = env("ARCHIVIST_CURATOR_URL  the curator's API: ingest and mail (default http://127.0.0.1:8080)",
	"ARCHIVIST_PWA_URL      the pwa's API: research (default http://127.0.0.1:8081)",
	"ARCHIVIST_AUDITOR_URL  the auditor's API: audit (default http://127.0.0.1:8082)",
	"ARCHIVIST_INDEXER_URL  the indexer's API: index (default http://127.0.0.1:8083)",
	"ARCHIVIST_TOKEN        the API key presented (else .archivist/api.token)",
	"NATS_URL and the other NATS_* variables (README): the dead letters (--pipeline bus), as NATS user operator")

// verbDocs say what each verb does, for help.
var verbDocs = map[work.Verb]string{
	work.Retry:   "Try failed or parked work again (ingest jobs from their last good step, episodes' failed clips, files, audit checks and repairs)",
	work.Release: "Let held or parked work go on",
	work.Hold:    "Hold waiting work until it is released (ingest jobs)",
	work.Skip:    "Give up on work without deleting it (files: parked until released)",
	work.Park:    "Set work aside until it is released (research episodes)",
	work.Requeue: "Start work again from its last successful step (ingest jobs; indexed files indexed again)",
	work.Delete:  "Delete work (its history stays; a dead letter is discarded)",
	work.Resend:  "Send parked mails again",
	work.Replay:  "Publish dead letters again on their subjects once their cause is fixed, and remove them",
}

func workCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "work",
		Short: "Find work across the pipelines and act on what a filter matches",
		Long: `Find any work of the archive with one filter (ingest jobs and batches, research
episodes, archive files being indexed, audit requests, repairs and checks, the
collections' mails, and the bus's dead letters), and act on one item or on
every item a filter matches:
first a dry run counts what would move, then the action confirmed with that
count (refused when the count moved). Every action is in the action log
('archivist work actions') and in each item's history.

Dead letters (bus/dead-letter/SEQ) are messages on the bus, reached with the
CLI's NATS credentials: find lists them with --pipeline bus; replay and
delete move them; the replayed message names its actor.

An item is pipeline/kind/id, as find lists it (ingest/job/12). A filter:
--pipeline, --kind, --state, --collection, --submitter, --older-than, --query
(an id, ARK, local id, file name or key, URL, episode, or words of the error).` + workEnv,
	}
	find := &cobra.Command{Use: "find [ITEM] [filter flags] [--limit N] [--after CURSOR] [--json]", Short: "List the work a filter matches, the latest moved first", Args: cobra.MaximumNArgs(1)}
	ff := filterFlags(find)
	limit := find.Flags().Int("limit", 50, "items a page (at most 500)")
	after := find.Flags().String("after", "", "the page after this cursor (find prints it)")
	asJSON := jsonFlag(find)
	find.RunE = func(c *cobra.Command, args []string) error {
		f, err := ff.filter(args)
		if err != nil {
			return err
		}
		var p work.Page
		if workcmd.ForDeadLetters("", f) {
			err = withDeadLetters(c, func(dl *workcmd.DeadLetters, _ string) (err error) {
				p, err = dl.Find(c.Context(), f, *after, *limit)
				return err
			})
		} else {
			p, err = workcmd.Client().Find(c.Context(), f, *after, *limit)
		}
		return show(safeOut(c), p, err, *asJSON, func(w io.Writer, p work.Page) error { return workcmd.PrintPage(w, p, time.Now()) })
	}
	c.AddCommand(find)
	for _, v := range work.Verbs {
		c.AddCommand(verbCmd(v))
	}
	actions := &cobra.Command{Use: "actions [--actor A] [--limit N] [--json]", Short: "The action log: who did what to which work, newest first", Args: cobra.NoArgs}
	actor := actions.Flags().String("actor", "", "only this actor's actions")
	alimit := actions.Flags().Int("limit", 50, "entries of each service's log")
	ajson := jsonFlag(actions)
	actions.RunE = func(c *cobra.Command, _ []string) error {
		as, err := workcmd.Client().Actions(c.Context(), *actor, *alimit)
		return show(safeOut(c), as, err, *ajson, workcmd.PrintActions)
	}
	c.AddCommand(actions)
	rates := &cobra.Command{Use: "rates [--window 10m] [--json]", Short: "Each queue's flow: in and out a minute, the backlog, when it would drain", Args: cobra.NoArgs}
	window := rates.Flags().String("window", "10m", "the window the rates are counted over (up to 7d)")
	rjson := jsonFlag(rates)
	rates.RunE = func(c *cobra.Command, _ []string) error {
		d, err := work.ParseAge(*window)
		if err != nil {
			return usagef("--window: %v", err)
		}
		rs, err := workcmd.Client().Rates(c.Context(), d)
		return show(safeOut(c), rs, err, *rjson, workcmd.PrintRates)
	}
	c.AddCommand(rates)
	return c
}

// verbCmd is `archivist work VERB`.
func verbCmd(v work.Verb) *cobra.Command {
	c := &cobra.Command{
		Use:   string(v) + " [ITEM] [filter flags] (--dry-run | --confirm N | --yes) [--json]",
		Short: verbDocs[v],
		Long: verbDocs[v] + `: one item, or every item the filter matches that the verb moves.
Without --confirm or --yes it is a dry run: it counts what would move and
prints how to confirm. --confirm N acts if N items still would; --yes counts
and acts at once (for scripts that have looked). A filter that names nothing
(no item, no flag) acts on nothing unless --all says so.` + workEnv,
		Args: cobra.MaximumNArgs(1),
	}
	ff := filterFlags(c)
	dry := c.Flags().Bool("dry-run", false, "count what would move, moving nothing (the default)")
	confirm := c.Flags().Int("confirm", -1, "act, if this many items would move (the dry run's count)")
	yes := c.Flags().Bool("yes", false, "count and act at once")
	all := c.Flags().Bool("all", false, "let an empty filter match every item of every pipeline")
	asJSON := jsonFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		f, err := ff.filter(args)
		if err != nil {
			return err
		}
		if f.Values().Encode() == "" && !*all {
			return usagef("name an item or a filter (or --all for every item of every pipeline)")
		}
		if *dry && (*confirm >= 0 || *yes) || (*confirm >= 0 && *yes) {
			return usagef("one of --dry-run, --confirm N and --yes")
		}
		out := safeOut(c)
		if workcmd.ForDeadLetters(v, f) {
			return withDeadLetters(c, func(dl *workcmd.DeadLetters, actor string) error {
				if *confirm < 0 && !*yes {
					n, err := dl.DryRun(c.Context(), v, f)
					again := "archivist work " + strings.Join(append([]string{string(v)}, c.Flags().Args()...), " ") + flagsOf(c)
					return show(out, n, err, *asJSON, func(w io.Writer, n work.Count) error { return workcmd.PrintCount(w, n, again) })
				}
				n := *confirm
				if *yes {
					count, err := dl.DryRun(c.Context(), v, f)
					if err != nil {
						return err
					}
					n = count.N
				}
				a, err := dl.Act(c.Context(), v, f, n, actor)
				if err != nil && a.Moved == 0 {
					return err
				}
				if perr := show(out, []work.Action{a}, nil, *asJSON, func(w io.Writer, as []work.Action) error {
					fmt.Fprintf(w, "%s moved %d item(s)\n", v, a.Moved)
					return workcmd.PrintActions(w, as)
				}); perr != nil {
					return perr
				}
				return err
			})
		}
		cl := workcmd.Client()
		if *confirm < 0 && !*yes {
			n, _, err := cl.DryRun(c.Context(), v, f)
			again := "archivist work " + strings.Join(append([]string{string(v)}, c.Flags().Args()...), " ") + flagsOf(c)
			return show(out, n, err, *asJSON, func(w io.Writer, n work.Count) error { return workcmd.PrintCount(w, n, again) })
		}
		var as []work.Action
		if *yes {
			as, err = cl.ActNow(c.Context(), v, f)
		} else {
			as, err = cl.Act(c.Context(), v, f, *confirm)
		}
		return show(out, as, err, *asJSON, func(w io.Writer, as []work.Action) error {
			moved := 0
			for _, a := range as {
				moved += a.Moved
			}
			fmt.Fprintf(w, "%s moved %d item(s)\n", v, moved)
			return workcmd.PrintActions(w, as)
		})
	}
	return c
}

// flagsOf is the filter flags c was given, as a command line repeats them.
func flagsOf(c *cobra.Command) string {
	var b strings.Builder
	c.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "dry-run" || f.Name == "json" {
			return
		}
		if f.Value.Type() == "bool" {
			fmt.Fprintf(&b, " --%s", f.Name)
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, s := range sv.GetSlice() {
				fmt.Fprintf(&b, " --%s %s", f.Name, quote(s))
			}
			return
		}
		fmt.Fprintf(&b, " --%s %s", f.Name, quote(f.Value.String()))
	})
	return b.String()
}

// quote quotes s for a shell when it needs it.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// workFilter holds the filter flags of a work command.
type workFilter struct {
	pipeline, kind, collection, submitter, olderThan, query string
	states                                                  []string
}

func filterFlags(c *cobra.Command) *workFilter {
	ff := &workFilter{}
	f := c.Flags()
	f.StringVar(&ff.pipeline, "pipeline", "", "ingest, mail, research, index or audit")
	f.StringVar(&ff.kind, "kind", "", "job, batch, mail, episode, file, request, repair, check")
	f.StringSliceVar(&ff.states, "state", nil, "a state (repeat, or comma-separate, for any of several)")
	f.StringVar(&ff.collection, "collection", "", "an ingest collection (profile)")
	f.StringVar(&ff.submitter, "submitter", "", "a depositor")
	f.StringVar(&ff.olderThan, "older-than", "", "in its state at least this long (90m, 36h, 7d)")
	f.StringVar(&ff.query, "query", "", "an id, ARK, local id, file name or key, URL, episode, or words of the error")
	return ff
}

// filter is the flags (and the item argument, if given) as a filter.
func (ff *workFilter) filter(args []string) (work.Filter, error) {
	f := work.Filter{Pipeline: ff.pipeline, Kind: ff.kind, States: ff.states, Collection: ff.collection, Submitter: ff.submitter, Query: ff.query}
	if len(args) == 1 {
		ref, err := workcmd.ParseRef(args[0])
		if err != nil {
			return f, &UsageError{err}
		}
		if (f.Pipeline != "" && f.Pipeline != ref.Pipeline) || (f.Kind != "" && f.Kind != ref.Kind) {
			return f, usagef("the item %s is not of --pipeline %q --kind %q", args[0], f.Pipeline, f.Kind)
		}
		f.Pipeline, f.Kind, f.ID = ref.Pipeline, ref.Kind, ref.ID
	}
	if ff.olderThan != "" {
		d, err := work.ParseAge(ff.olderThan)
		if err != nil {
			return f, usagef("--older-than: %v", err)
		}
		f.OlderThan = d
	}
	if err := f.Validate(); err != nil {
		return f, &UsageError{err}
	}
	return f, nil
}

// withDeadLetters runs do on the bus's dead letters, as the CLI's NATS
// user (the actor a replay names).
func withDeadLetters(c *cobra.Command, do func(dl *workcmd.DeadLetters, actor string) error) error {
	b, actor, err := connectAs(c)
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(c.Context()))
	log, err := logging.FromEnv(c.Context(), c.ErrOrStderr())
	if err != nil {
		return err
	}
	return do(&workcmd.DeadLetters{Bus: b, Log: log}, actor)
}

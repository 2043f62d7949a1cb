package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/pkg/work"

	"github.com/archivist/archivist/services/archivist/locatecmd"
	"github.com/archivist/archivist/services/archivist/researchcmd"
	"github.com/archivist/archivist/services/archivist/works"
	"github.com/archivist/archivist/services/curator/api"
	"github.com/archivist/archivist/services/curator/matcher"
)

func researchCmd() *cobra.Command {
	var base string
	c := &cobra.Command{
		Use:   "research",
		Short: "Research progress, and an episode's research again",
		Long:  "Research progress (from the pwa), and the operator's actions on an episode's research." + env("ARCHIVIST_PWA_URL  the pwa's API (default http://127.0.0.1:8081)", "ARCHIVIST_TOKEN    the API key presented (else .archivist/api.token)"),
	}
	c.PersistentFlags().StringVar(&base, "pwa", envOr("ARCHIVIST_PWA_URL", "http://127.0.0.1:8081"), "the pwa's API (ARCHIVIST_PWA_URL)")
	status := &cobra.Command{
		Use:   "status [--json]",
		Short: "Episodes complete, in progress and waiting; leases, queue depth, live researchers",
		Args:  cobra.NoArgs,
	}
	asJSON := jsonFlag(status)
	status.RunE = func(c *cobra.Command, _ []string) error {
		st, err := researchcmd.Fetch(c.Context(), base)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(safeOut(c), st)
		}
		return researchcmd.Print(safeOut(c), st, time.Now())
	}
	release := &cobra.Command{
		Use:   "release EPISODE",
		Short: "Lease a parked episode again",
		Args:  exactly(1, "one EPISODE"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := researchcmd.Release(c.Context(), base, args[0], work.Release); err != nil {
				return err
			}
			_, err := fmt.Fprintf(safeOut(c), "released %s: it is leased again\n", args[0])
			return err
		},
	}
	retry := &cobra.Command{
		Use:   "retry EPISODE",
		Short: "Research an episode's failed clips again (archivist work retry research/episode/EPISODE)",
		Args:  exactly(1, "one EPISODE"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := researchcmd.Release(c.Context(), base, args[0], work.Retry); err != nil {
				return err
			}
			_, err := fmt.Fprintf(safeOut(c), "%s: its failed clips are leased again\n", args[0])
			return err
		},
	}
	c.AddCommand(status, release, retry)
	c.AddCommand(&cobra.Command{
		Use:   "redo EPISODE",
		Short: "Research all an episode's clips again",
		Args:  exactly(1, "one EPISODE"),
		RunE: func(c *cobra.Command, args []string) error {
			n, err := researchcmd.Redo(c.Context(), base, args[0], "redo")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(safeOut(c), "%s: %d results forgotten; its clips are leased again\n", args[0], n)
			return err
		},
	})
	return c
}

func worksCmd() *cobra.Command {
	c := &cobra.Command{Use: "works", Short: "Merged works: the records a key belongs with"}
	showCmd := &cobra.Command{
		Use:   "show KEY [--kind episode|clip] [--json]",
		Short: "Show the merged work a record key (\"source:id\") belongs to",
		Long:  "Show the merged work a record key (\"source:id\") belongs to: its graph, source records, versions and redirects.",
	}
	kind, base := worksArgs(showCmd, 1)
	asJSON := jsonFlag(showCmd)
	showCmd.RunE = func(c *cobra.Command, args []string) error {
		v, err := works.Fetch(c.Context(), *base, *kind, args[0])
		return show(safeOut(c), v, err, *asJSON, works.Print)
	}
	c.AddCommand(showCmd, explainCmd(), decideCmd(matcher.Merge), decideCmd(matcher.Split))
	return c
}

// worksArgs gives a works command what every one has: it takes keys record
// keys ("source:id"), the --kind and --curator flags, and the variables it
// reads in its help.
func worksArgs(c *cobra.Command, keys int) (kind, base *string) {
	kind, base = new(string), new(string)
	c.Flags().StringVar(kind, "kind", "episode", "episode or clip")
	c.Flags().StringVar(base, "curator", envOr("ARCHIVIST_CURATOR_URL", "http://127.0.0.1:8080"), "the curator's API (ARCHIVIST_CURATOR_URL)")
	c.Long += env("ARCHIVIST_CURATOR_URL  the curator's API (default http://127.0.0.1:8080)", "ARCHIVIST_TOKEN        the API key presented (else .archivist/api.token)")
	more := c.Args
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) != keys {
			return usagef("takes %d record key(s), \"source:id\"", keys)
		}
		if *kind != "episode" && *kind != "clip" {
			return usagef("--kind is episode or clip, not %q", *kind)
		}
		if more != nil {
			return more(cmd, args)
		}
		return nil
	}
	return kind, base
}

// explainCmd is `archivist works explain`.
func explainCmd() *cobra.Command {
	var at, since string
	c := &cobra.Command{
		Use:   "explain KEY [--kind episode|clip] [--at TIME] [--since TIME] [--json]",
		Short: "Explain why a record's work is what it is: each field's record, version and rule, its links",
		Long: "Explain the merged work a record key (\"source:id\") belongs to, now or --at an RFC 3339 time: each field with\n" +
			"the record, version and precedence rule that supplied it, the members in the order the rule reads them,\n" +
			"the same-as links that formed its graph and those refused; with --since, what changed since then.",
	}
	kind, base := worksArgs(c, 1)
	c.Flags().StringVar(&at, "at", "", "explain the work as it was at this RFC 3339 time (default now)")
	c.Flags().StringVar(&since, "since", "", "and what changed since this RFC 3339 time")
	asJSON := jsonFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		times := map[string]time.Time{}
		for name, v := range map[string]string{"--at": at, "--since": since} {
			if v == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return usagef("%s: an RFC 3339 time (2026-01-02T03:04:05Z), not %q", name, v)
			}
			times[name] = t
		}
		e, err := works.FetchExplained(c.Context(), *base, *kind, args[0], times["--at"], times["--since"])
		return show(safeOut(c), e, err, *asJSON, works.PrintExplained)
	}
	return c
}

// decideCmd is `archivist works merge` and `archivist works split`: an
// operator's correction of the matcher, or with --undo its taking back.
func decideCmd(action string) *cobra.Command {
	var reason string
	var undo bool
	use, short, keys := "merge A B --reason WHY [--undo]", "Merge the works of two records whatever their links say (kept over later updates)", 2
	if action == matcher.Split {
		use, short, keys = "split KEY --reason WHY [--undo]", "Split a record out of its work: no link to or from it counts (kept over later updates)", 1
	}
	c := &cobra.Command{
		Use:   use + " [--kind episode|clip] [--json]",
		Short: short,
		Long: short + ". The decision is recorded with who took it and why, in force at once (the graph matched again in the same " +
			"transaction), shown in `works explain`; --undo takes it back. Needs the operator role.",
		Args: func(*cobra.Command, []string) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("--reason: why (kept with the decision)")
			}
			return nil
		},
	}
	kind, base := worksArgs(c, keys)
	c.Flags().StringVar(&reason, "reason", "", "why (kept with the decision)")
	c.Flags().BoolVar(&undo, "undo", false, "take the decision back")
	asJSON := jsonFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		req := api.DecisionRequest{Action: action, A: args[0], Reason: reason}
		if len(args) == 2 {
			req.B = args[1]
		}
		if undo {
			req.Action = "un" + action
		}
		d, err := works.Decide(c.Context(), *base, *kind, req)
		return show(safeOut(c), d, err, *asJSON, works.PrintDecision)
	}
	return c
}

func locateCmd() *cobra.Command {
	var episode, clips string
	c := &cobra.Command{
		Use:   "locate --episode FILE --clips DIR [--speed-range R] [--explain] [--json]",
		Short: "Find every occurrence of each clip inside an episode",
		Long: `Find every occurrence of each clip (WAV, FLAC, MP3, Ogg Vorbis files in DIR)
inside the episode, as the researchers do. A clip that cannot be read fails
alone: the others' results are printed, then the error names it.`,
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&episode, "episode", "", "the episode's audio file")
	c.Flags().StringVar(&clips, "clips", "", "a directory of clip audio files")
	_ = c.MarkFlagRequired("episode")
	_ = c.MarkFlagRequired("clips")
	explain := c.Flags().Bool("explain", false, "also say why each clip found nowhere was not found: its best candidates and the stage that refused each (with --json: {\"occurrences\": [...], \"misses\": [...]})")
	speeds := c.Flags().Float64("speed-range", 0.02, "find clips played this far from their own speed (0.1: from 10 % slow to 10 % fast; as RESEARCHER_SPEED_RANGE); tempo changes with the pitch kept are found to 10 % at any setting")
	asJSON := jsonFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		var (
			rs     []locatecmd.Result
			misses []locatecmd.Missed
			err    error
		)
		opt := locatecmd.SpeedRange(*speeds)
		if *explain {
			rs, misses, err = locatecmd.Explain(c.Context(), episode, clips, opt)
		} else {
			rs, err = locatecmd.Locate(c.Context(), episode, clips, opt)
		}
		if rs == nil && err != nil {
			return err
		}
		if rs == nil {
			rs = []locatecmd.Result{}
		}
		if *asJSON && *explain {
			if misses == nil {
				misses = []locatecmd.Missed{}
			}
			return errors.Join(printJSON(c.OutOrStdout(), map[string]any{"occurrences": rs, "misses": misses}), err)
		}
		if *asJSON {
			return errors.Join(printJSON(c.OutOrStdout(), rs), err)
		}
		return errors.Join(locatecmd.Print(c.OutOrStdout(), rs), locatecmd.PrintMisses(c.OutOrStdout(), misses), err)
	}
	return c
}

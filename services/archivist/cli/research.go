package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/pkg/work"

	"github.com/archivist/archivist/services/archivist/locatecmd"
	"github.com/archivist/archivist/services/archivist/researchcmd"
	"github.com/archivist/archivist/services/archivist/works"
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
	var kind, base string
	showCmd := &cobra.Command{
		Use:   "show KEY [--kind episode|clip] [--json]",
		Short: "Show the merged work a record key (\"source:id\") belongs to",
		Long: "Show the merged work a record key (\"source:id\") belongs to: its graph, source records, versions and redirects." +
			env("ARCHIVIST_CURATOR_URL  the curator's API (default http://127.0.0.1:8080)", "ARCHIVIST_TOKEN        the API key presented (else .archivist/api.token)"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("takes one record key, \"source:id\"")
			}
			if kind != "episode" && kind != "clip" {
				return usagef("--kind is episode or clip, not %q", kind)
			}
			return nil
		},
	}
	showCmd.Flags().StringVar(&kind, "kind", "episode", "episode or clip")
	showCmd.Flags().StringVar(&base, "curator", envOr("ARCHIVIST_CURATOR_URL", "http://127.0.0.1:8080"), "the curator's API (ARCHIVIST_CURATOR_URL)")
	asJSON := jsonFlag(showCmd)
	showCmd.RunE = func(c *cobra.Command, args []string) error {
		v, err := works.Fetch(c.Context(), base, kind, args[0])
		return show(safeOut(c), v, err, *asJSON, works.Print)
	}
	c.AddCommand(showCmd)
	return c
}

func locateCmd() *cobra.Command {
	var episode, clips string
	c := &cobra.Command{
		Use:   "locate --episode FILE --clips DIR [--json]",
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
	asJSON := jsonFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		rs, err := locatecmd.Locate(c.Context(), episode, clips)
		if rs == nil && err != nil {
			return err
		}
		if *asJSON {
			if rs == nil {
				rs = []locatecmd.Result{}
			}
			return errors.Join(printJSON(c.OutOrStdout(), rs), err)
		}
		return errors.Join(locatecmd.Print(c.OutOrStdout(), rs), err)
	}
	return c
}

package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/services/archivist/indexcmd"
	"github.com/archivist/archivist/services/indexer/cdx"
)

func indexCmd() *cobra.Command {
	var base, agg string
	c := &cobra.Command{
		Use:   "index",
		Short: "Web-archive indexing: files by status, parked files, freshness",
		Long: "Web-archive indexing: files by status, parked files with their errors, freshness; make a parked file due again." +
			env("ARCHIVIST_INDEXER_URL     the indexer's API (default http://127.0.0.1:8083)",
				"ARCHIVIST_AGGREGATOR_URL  the aggregator's API (default http://127.0.0.1:8084)",
				"ARCHIVIST_TOKEN           the API key presented (else .archivist/api.token)"),
	}
	c.PersistentFlags().StringVar(&base, "indexer", envOr("ARCHIVIST_INDEXER_URL", "http://127.0.0.1:8083"), "the indexer's API (ARCHIVIST_INDEXER_URL)")
	status := &cobra.Command{Use: "status [--json]", Short: "Files by status, parked files, the index's generations", Args: cobra.NoArgs}
	status.Flags().StringVar(&agg, "aggregator", envOr("ARCHIVIST_AGGREGATOR_URL", "http://127.0.0.1:8084"), "the aggregator's API (ARCHIVIST_AGGREGATOR_URL)")
	asJSON := jsonFlag(status)
	status.RunE = func(c *cobra.Command, _ []string) error {
		st, err := indexcmd.Status(c.Context(), base)
		if err != nil {
			return err
		}
		gens, genErr := indexcmd.Generations(c.Context(), agg)
		if *asJSON {
			if genErr != nil {
				return genErr
			}
			return printJSON(safeOut(c), map[string]any{"files": st, "generations": gens})
		}
		return indexcmd.Print(safeOut(c), st, gens, genErr, time.Now())
	}
	c.AddCommand(status)
	// retry: every pipeline's retry verb.
	for _, verb := range []string{"reset", "retry"} {
		c.AddCommand(&cobra.Command{
			Use:   verb + " FILE",
			Short: "Make a parked file due again",
			Args:  exactly(1, "one FILE"),
			RunE: func(c *cobra.Command, args []string) error {
				if err := indexcmd.Reset(c.Context(), base, args[0]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(safeOut(c), "%s is due again\n", args[0])
				return err
			},
		})
	}
	return c
}

func cdxCmd() *cobra.Command {
	var cdxj, sorted bool
	var dialect string
	c := &cobra.Command{
		Use:   "cdx [--cdxj] [--sort] [--dialect pywb|cdxj-indexer] FILE...",
		Short: "Write the CDX index lines of ARC/WARC files",
		Long: `Write the CDX index lines of ARC/WARC files to stdout, as pywb's cdx-indexer
does (byte-identical on the shared test archives), or with --dialect
cdxj-indexer as webrecorder's cdxj-indexer does (its -11 for CDX11; the
digest's "sha1:" kept, a revisit's status kept, no "unk" mime). Every
file's lines up to a fault are written; the faults are reported on stderr
and make the command fail.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("takes one FILE or more")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			line, err := cdxLine(cdxj, dialect)
			if err != nil {
				return err
			}
			return writeCDX(args, cdxj, sorted, line, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	c.Flags().BoolVar(&cdxj, "cdxj", false, "write CDXJ instead of CDX11")
	c.Flags().StringVar(&dialect, "dialect", "pywb", "whose lines: pywb (its cdx-indexer) or cdxj-indexer (webrecorder's)")
	c.Flags().BoolVar(&sorted, "sort", false, "sort the lines (as cdx-indexer -s)")
	return c
}

// cdxLine is how an entry is written: CDX11 or CDXJ, in a dialect.
func cdxLine(cdxj bool, dialect string) (func(cdx.Entry) string, error) {
	switch {
	case dialect == "pywb" && cdxj:
		return cdx.Entry.CDXJ, nil
	case dialect == "pywb":
		return cdx.Entry.String, nil
	case dialect == "cdxj-indexer" && cdxj:
		return cdx.Entry.CDXJIndexer, nil
	case dialect == "cdxj-indexer":
		return cdx.Entry.CDX11Indexer, nil
	}
	return nil, usagef("--dialect: pywb or cdxj-indexer, not %q", dialect)
}

// writeCDX indexes files: CDX11 (with its header line) or CDXJ, each line
// written by line, in file order or sorted.
func writeCDX(files []string, cdxj, sorted bool, line func(cdx.Entry) string, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	if !cdxj {
		fmt.Fprintln(w, cdx.Header)
	}
	var lines []string
	var faults []error
	add := func(e cdx.Entry) error {
		l := line(e)
		if sorted {
			lines = append(lines, l)
			return nil
		}
		w.WriteString(l)
		return w.WriteByte('\n')
	}
	for _, name := range files {
		if err := indexFile(name, add); err != nil {
			faults = append(faults, fmt.Errorf("%s: %w", name, err))
		}
	}
	if sorted {
		if err := cdx.WriteSorted(w, lines); err != nil {
			return err
		}
	}
	for _, err := range faults {
		fmt.Fprintln(stderr, "archivist cdx:", err)
	}
	if len(faults) > 0 {
		return fmt.Errorf("%d of %d files could not be indexed whole", len(faults), len(files))
	}
	return nil
}

// indexFile indexes one file: a regular file on every core (a gzipped
// WARC's members are read in parallel spans), a pipe or device as one
// stream.
func indexFile(name string, add func(cdx.Entry) error) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		_, err = cdx.IndexAt(f, fi.Size(), filepath.Base(name), runtime.GOMAXPROCS(0), add)
	} else {
		_, err = cdx.Index(bufio.NewReaderSize(f, 1<<20), filepath.Base(name), add)
	}
	return err
}

// Command archivist is the operator's tool: `archivist dev` runs the whole
// system in one process, `archivist migrate` migrates every schema.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/services/archivist/all"
	"github.com/archivist/archivist/services/archivist/auditcmd"
	"github.com/archivist/archivist/services/archivist/batchcmd"
	"github.com/archivist/archivist/services/archivist/dev"
	"github.com/archivist/archivist/services/archivist/indexcmd"
	"github.com/archivist/archivist/services/archivist/keycmd"
	"github.com/archivist/archivist/services/archivist/locatecmd"
	"github.com/archivist/archivist/services/archivist/researchcmd"
	"github.com/archivist/archivist/services/archivist/works"
	"github.com/archivist/archivist/services/indexer/cdx"
)

const usage = `usage: archivist <command> [flags]

commands:
  dev [--demo]
            run the whole system in one process: embedded NATS (JetStream),
            a private PostgreSQL under the data dir unless DATABASE_URL is set,
            a local blob store, and every service; --demo seeds a little of
            everything (research, a batch, WARC files) once it is ready
  migrate   run every service's migrations against DATABASE_URL
  research status | release|retry|redo EPISODE
            research progress: episodes complete, in progress and waiting,
            active leases, queue depth and live researchers (from the pwa)
  audit status [--json]
            bit integrity: objects checked this cycle, failures by row,
            open resolution tasks, audit queue, dead letters
  audit check OBJECT | --space PREFIX [--light]
            queue high-priority checks now
  audit parked | resolutions [--all] | close TASK
            objects whose check failed three times; resolution tasks
  key new NAME --role ROLE[,ROLE] [--source SOURCE] [--collections C,...]
            make an API key: prints the key (give it to its holder) and
            the line to add to API_KEYS_FILE; delete the line to revoke it
            (the CLI presents ARCHIVIST_TOKEN, or .archivist/api.token)
  key new NAME --nats --source SOURCE
            make a curating system's NATS user: prints its password and the
            line to add to k8s/nats/publishers; delete the line to revoke it
  key init DIR | key token DIR
            make DIR's keys file with a key of its own for the local
            operator, unless it has one (compose's first start); print it
  nats-auth [--publishers FILE]
            print the NATS server's users (k8s/nats/auth.conf): every
            service's and every curating system's of FILE
  index status [--json] | index reset FILE
            indexing: files by status, parked files with their errors,
            freshness; make a parked file due again
  cdx [--cdxj] [--sort] FILE...
            write the CDX index lines of ARC/WARC files to stdout, as pywb's
            cdx-indexer does (byte-identical on the shared test archives)
  batch submit --profile P --payload URL --type TYPE [--wait]
  batch status ID | job status ID   (also release, delete, requeue, ...)
  collection hold|release PROFILE | ingest pause|resume|cleanup
            ingest: submit batches, follow them, and the operator's
            actions ('archivist batch' alone prints the transition table)
  locate --episode FILE --clips DIR [--json]
            find every occurrence of each clip (WAV, FLAC, MP3, Ogg Vorbis
            files in DIR) inside the episode, as the researchers do
  dlq list [--limit N] [--json]
            dead-lettered messages: where they came from and why
  dlq replay SEQ
            publish dead letter SEQ again on its subject (after fixing the
            cause), and remove it from the dead-letter stream
  blob put KEY [FILE]
            store FILE (or standard input) in the blob store (BLOB_URL) under
            KEY, with its sha256 stated: a WARC into the indexers'
            repository, audio for a record's media
  works show KEY
            show the merged work a record key ("source:id") belongs to: its
            graph, source records, versions and redirects
  version   print the version

Run 'archivist <command> -h' for a command's help and flags (no running
system needed). Exit status: 0 done (and for -h), 1 an error or a wrong
usage, said on standard error.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "archivist:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command")
	}
	switch {
	case args[0] == "--version" || args[0] == "-version":
		fmt.Fprintln(stdout, "archivist", service.Version)
		return nil
	case helpAsked(args[1:]):
		// Help needs no running system: it is printed before any command
		// reads its configuration or connects.
		h, ok := commandHelp(args[0])
		if !ok {
			fmt.Fprint(stderr, usage)
			return fmt.Errorf("unknown command %q", args[0])
		}
		fmt.Fprint(stdout, h)
		if flagged(args) {
			// Its flags, from the command itself: it parses them before it
			// does anything, and stops at the help flag.
			fmt.Fprintln(stdout)
			if err := dispatch(ctx, withoutHelp(args), stdout, stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
				return err
			}
		}
		return nil
	}
	return dispatch(ctx, args, stdout, stderr)
}

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	log, err := logging.FromEnv(ctx, stderr)
	if err != nil {
		return err
	}
	switch args[0] {
	case "works", "research", "audit", "index", "batch", "job", "collection", "ingest", "dlq":
		// These print what others wrote: no control character gets through.
		stdout = &printable{w: stdout}
	}
	switch args[0] {
	case "dev":
		var o dev.Options
		if err := config.Load(ctx, &o, nil); err != nil {
			return err
		}
		fs := flag.NewFlagSet("dev", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory for NATS, PostgreSQL and blob data (ARCHIVIST_DATA_DIR)")
		fs.IntVar(&o.NATSPort, "nats-port", o.NATSPort, "NATS client port (ARCHIVIST_NATS_PORT)")
		fs.IntVar(&o.NATSMonitorPort, "nats-monitor-port", o.NATSMonitorPort, "NATS monitoring port, 0 to disable (ARCHIVIST_NATS_MONITOR_PORT)")
		fs.IntVar(&o.PGPort, "pg-port", o.PGPort, "private PostgreSQL port (ARCHIVIST_PG_PORT)")
		fs.StringVar(&o.AdminAddr, "admin-addr", o.AdminAddr, "admin server address (ADMIN_ADDR)")
		fs.StringVar(&o.CuratorAddr, "curator-addr", o.CuratorAddr, "curation API address (CURATOR_HTTP_ADDR)")
		fs.StringVar(&o.PWAAddr, "pwa-addr", o.PWAAddr, "research status API address (PWA_HTTP_ADDR)")
		fs.StringVar(&o.AuditorAddr, "auditor-addr", o.AuditorAddr, "audit API address (AUDITOR_HTTP_ADDR)")
		fs.StringVar(&o.IndexerAddr, "indexer-addr", o.IndexerAddr, "index API address (INDEXER_HTTP_ADDR)")
		fs.StringVar(&o.AggregatorAddr, "aggregator-addr", o.AggregatorAddr, "CDX query API address (AGGREGATOR_HTTP_ADDR)")
		fs.StringVar(&o.DashboardAddr, "dashboard-addr", o.DashboardAddr, "the operator's dashboard address (DASHBOARD_HTTP_ADDR)")
		fs.BoolVar(&o.Demo, "demo", o.Demo, "seed demo data once ready: episodes and jingles, a batch, WARC files (ARCHIVIST_DEMO)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		shutdown, err := telemetry.Setup(ctx, "archivist")
		if err != nil {
			return err
		}
		defer shutdown(context.WithoutCancel(ctx))
		return dev.Run(ctx, o, all.Services(), log, stdout)
	case "migrate":
		var common service.Common
		if err := config.Load(ctx, &common, nil); err != nil {
			return err
		}
		return service.Migrate(ctx, all.Services(), common, log)
	case "works":
		return worksCmd(ctx, args[1:], stdout, stderr)
	case "research":
		return researchCmd(ctx, args[1:], stdout, stderr)
	case "audit":
		return auditCmd(ctx, args[1:], stdout, stderr)
	case "cdx":
		return cdxCmd(args[1:], stdout, stderr)
	case "index":
		return indexCmd(ctx, args[1:], stdout, stderr)
	case "batch", "job", "collection", "ingest":
		return batchcmd.Run(ctx, args, stdout, stderr)
	case "locate":
		return locateCmd(ctx, args[1:], stdout, stderr)
	case "key":
		return keycmd.Run(args[1:], stdout, stderr)
	case "nats-auth":
		return keycmd.NATSAuth(args[1:], stdout, stderr)
	case "blob":
		return blobCmd(ctx, args[1:], os.Stdin, stdout)
	case "dlq":
		return dlqCmd(ctx, args[1:], stdout, stderr, log)
	case "version":
		fmt.Fprintln(stdout, "archivist", service.Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// blobCmd is `archivist blob put KEY [FILE]`: the file (or in) is read
// once to state its sha256, then stored under KEY in BLOB_URL's store.
func blobCmd(ctx context.Context, args []string, in io.Reader, stdout io.Writer) error {
	if len(args) < 2 || len(args) > 3 || args[0] != "put" {
		return fmt.Errorf("usage: archivist blob put KEY [FILE]")
	}
	var cfg blob.Config
	if err := config.Load(ctx, &cfg, nil); err != nil {
		return err
	}
	src := in
	if len(args) == 3 {
		f, err := os.Open(args[2])
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	tmp, err := os.CreateTemp("", "archivist-blob-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		return fmt.Errorf("read %s: %w", args[1], err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	st, err := blob.Open(ctx, cfg)
	if err != nil {
		return err
	}
	info, err := st.Put(ctx, args[1], tmp, map[string]string{blob.PropSHA256: hex.EncodeToString(h.Sum(nil))})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %d %s\n", info.Key, info.Size, info.Checksum)
	return nil
}

// flagged tells whether the command args name parses flags before it does
// anything else, so that its -h prints them.
func flagged(args []string) bool {
	switch args[0] {
	case "dev", "locate", "cdx":
		return true
	case "index":
		return len(args) > 1 && args[1] == "status"
	case "batch":
		return len(args) > 1 && args[1] == "submit"
	}
	return false
}

// withoutHelp is args with every help flag as -h, where the flag package
// stops.
func withoutHelp(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a == "--help" || a == "-help" {
			a = "-h"
		}
		out = append(out, a)
	}
	return out
}

// helpAsked tells whether args ask for help (-h, -help, --help).
func helpAsked(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// commandHelp is the part of the usage that describes command: each entry
// whose first line names it, with its description.
func commandHelp(command string) (string, bool) {
	var out strings.Builder
	lines := strings.Split(usage, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "            ") {
			continue
		}
		words := strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '|' })
		if !slices.Contains(words, command) {
			continue
		}
		out.WriteString(l + "\n")
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "            ") {
			i++
			out.WriteString(lines[i] + "\n")
		}
	}
	if out.Len() == 0 {
		return "", false
	}
	return "usage: archivist " + command + " ...\n\n" + out.String() +
		"\nExit status: 0 done (and for -h), 1 an error or a wrong usage, said on standard error.\n", true
}

func worksCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "show" {
		return fmt.Errorf("usage: archivist works show [--kind episode|clip] [--curator URL] [--json] KEY")
	}
	fs := flag.NewFlagSet("works show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "episode", "episode or clip")
	base := fs.String("curator", envOr("ARCHIVIST_CURATOR_URL", "http://127.0.0.1:8080"), "the curator's API (ARCHIVIST_CURATOR_URL)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("works show takes one record key, \"source:id\"")
	}
	v, err := works.Fetch(ctx, *base, *kind, fs.Arg(0))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	return works.Print(stdout, v)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func researchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: archivist research status [--pwa URL] [--json] | archivist research release|retry|redo [--pwa URL] EPISODE\n" +
		"  release: a parked episode is leased again; retry: its failed clips are researched again; redo: all its clips are"
	if len(args) == 0 || !slices.Contains([]string{"status", "release", "retry", "redo"}, args[0]) {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("research "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("pwa", envOr("ARCHIVIST_PWA_URL", "http://127.0.0.1:8081"), "the pwa's API (ARCHIVIST_PWA_URL)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "release" {
		if fs.NArg() != 1 {
			return errors.New(usage)
		}
		if err := researchcmd.Release(ctx, *base, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "released %s: it is leased again\n", fs.Arg(0))
		return nil
	}
	if args[0] == "retry" || args[0] == "redo" {
		if fs.NArg() != 1 {
			return errors.New(usage)
		}
		n, err := researchcmd.Redo(ctx, *base, fs.Arg(0), args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d results forgotten; its clips are leased again\n", fs.Arg(0), n)
		return nil
	}
	st, err := researchcmd.Fetch(ctx, *base)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, st)
	}
	return researchcmd.Print(stdout, st, time.Now())
}

func locateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("locate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	episode := fs.String("episode", "", "the episode's audio file")
	clips := fs.String("clips", "", "a directory of clip audio files")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *episode == "" || *clips == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: archivist locate --episode FILE --clips DIR [--json]")
	}
	// A clip that cannot be read fails alone: the others' results are
	// printed, then the error names it.
	rs, err := locatecmd.Locate(ctx, *episode, *clips)
	if rs == nil && err != nil {
		return err
	}
	if *asJSON {
		if rs == nil {
			rs = []locatecmd.Result{}
		}
		return errors.Join(printJSON(stdout, rs), err)
	}
	return errors.Join(locatecmd.Print(stdout, rs), err)
}

func dlqCmd(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	usage := fmt.Errorf("usage: archivist dlq list [--from SEQ] [--limit N] [--json] | archivist dlq replay SEQ | archivist dlq replay --all [--consumer NAME] [--limit N]")
	if len(args) == 0 {
		return usage
	}
	var cfg bus.Config
	if err := config.Load(ctx, &cfg, nil); err != nil {
		return err
	}
	b, err := bus.Connect(ctx, cfg, "archivist-cli", bus.WithLogger(log))
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	switch args[0] {
	case "list":
		fs := flag.NewFlagSet("dlq list", flag.ContinueOnError)
		fs.SetOutput(stderr)
		from := fs.Uint64("from", 0, "first sequence to show")
		limit := fs.Int("limit", 50, "most dead letters to show")
		asJSON := fs.Bool("json", false, "print JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		list, err := b.DeadLetters(ctx, *from, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, list)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tAT\tFROM\tSUBJECT\tEVENT\tDELIVERIES\tREASON")
		for _, d := range list {
			fmt.Fprintf(tw, "%d\t%s\t%s/%s#%d\t%s\t%s\t%d\t%s\n", d.Seq, d.At.Format(time.RFC3339), d.Stream, d.Consumer, d.OriginalSeq,
				d.Subject, d.ID, d.Deliveries, d.Reason)
		}
		if len(list) == 0 {
			fmt.Fprintln(tw, "(no dead letters)")
		}
		return tw.Flush()
	case "replay":
		if len(args) > 1 && strings.HasPrefix(args[1], "-") {
			fs := flag.NewFlagSet("dlq replay", flag.ContinueOnError)
			fs.SetOutput(stderr)
			all := fs.Bool("all", false, "replay every dead letter (of --consumer, if given)")
			consumer := fs.String("consumer", "", "only this consumer's dead letters")
			limit := fs.Int("limit", 1000, "most dead letters to replay")
			if err := fs.Parse(args[1:]); err != nil {
				return err
			}
			if !*all || fs.NArg() != 0 {
				return usage
			}
			done, err := b.ReplayAll(ctx, *consumer, *limit)
			fmt.Fprintf(stdout, "replayed %d dead letters\n", len(done))
			return err
		}
		if len(args) != 2 {
			return usage
		}
		seq, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			return fmt.Errorf("dead letter sequence %q: %w", args[1], err)
		}
		d, err := b.Replay(ctx, seq)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "replayed dead letter %d on %s (it had failed: %s)\n", seq, d.Subject, d.Reason)
		return nil
	default:
		return usage
	}
}

func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := fmt.Errorf("usage: archivist audit status [--json] | archivist audit check [--light] OBJECT | archivist audit check [--light] --space PREFIX |\n" +
		"       archivist audit parked [--json] | archivist audit resolutions [--all] [--json] | archivist audit close TASK-ID")
	if len(args) == 0 {
		return usage
	}
	fs := flag.NewFlagSet("audit "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("auditor", envOr("ARCHIVIST_AUDITOR_URL", "http://127.0.0.1:8082"), "the auditor's API (ARCHIVIST_AUDITOR_URL)")
	asJSON := fs.Bool("json", false, "print JSON")
	space := fs.String("space", "", "check every object whose key starts with this prefix")
	light := fs.Bool("light", false, "compare checksums without reading the content")
	all := fs.Bool("all", false, "resolutions: closed tasks too")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "parked":
		p, err := auditcmd.Parked(ctx, *base)
		return show(stdout, p, err, *asJSON, auditcmd.PrintParked)
	case "resolutions":
		res, err := auditcmd.Resolutions(ctx, *base, *all)
		return show(stdout, res, err, *asJSON, auditcmd.PrintResolutions)
	case "close":
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil {
			return usage
		}
		if err := auditcmd.Close(ctx, *base, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "resolution task %d closed; a check of its object is queued\n", id)
		return nil
	case "status":
		st, err := auditcmd.Status(ctx, *base)
		return show(stdout, st, err, *asJSON, auditcmd.Print)
	case "check":
		object := fs.Arg(0)
		if (object == "") == (*space == "") {
			return usage
		}
		n, err := auditcmd.Check(ctx, *base, object, *space, *light)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "queued %d high-priority checks\n", n)
		return nil
	default:
		return usage
	}
}

// show prints a view read with err: as JSON, or for a person.
func show[T any](stdout io.Writer, v T, err error, asJSON bool, print func(io.Writer, T) error) error {
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, v)
	}
	return print(stdout, v)
}

// printJSON writes v as indented JSON: the --json form of every view.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cdxCmd indexes files: CDX11 (with its header line) or CDXJ, in file order
// or sorted. Every file's lines up to a fault are written; the faults are
// reported on stderr and make the command fail.
func cdxCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cdx", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cdxj := fs.Bool("cdxj", false, "write CDXJ instead of CDX11")
	sorted := fs.Bool("sort", false, "sort the lines (as cdx-indexer -s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: archivist cdx [--cdxj] [--sort] FILE...")
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	if !*cdxj {
		fmt.Fprintln(w, cdx.Header)
	}
	var lines []string
	var faults []error
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			faults = append(faults, err)
			continue
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			faults = append(faults, err)
			continue
		}
		add := func(e cdx.Entry) error {
			line := e.String()
			if *cdxj {
				line = e.CDXJ()
			}
			if *sorted {
				lines = append(lines, line)
				return nil
			}
			_, err := fmt.Fprintln(w, line)
			return err
		}
		if fi.Mode().IsRegular() {
			// Every core: a gzipped WARC's members are read in parallel spans.
			_, err = cdx.IndexAt(f, fi.Size(), filepath.Base(name), runtime.GOMAXPROCS(0), add)
		} else { // a pipe, a device: one stream
			_, err = cdx.Index(bufio.NewReaderSize(f, 1<<20), filepath.Base(name), add)
		}
		f.Close()
		if err != nil {
			faults = append(faults, fmt.Errorf("%s: %w", name, err))
		}
	}
	if *sorted {
		if err := cdx.WriteSorted(w, lines); err != nil {
			return err
		}
	}
	for _, err := range faults {
		fmt.Fprintln(stderr, "archivist cdx:", err)
	}
	if len(faults) > 0 {
		return fmt.Errorf("%d of %d files could not be indexed whole", len(faults), fs.NArg())
	}
	return nil
}

func indexCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := fmt.Errorf("usage: archivist index status [--json] | archivist index reset|retry FILE")
	if len(args) == 0 {
		return usage
	}
	fs := flag.NewFlagSet("index "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("indexer", envOr("ARCHIVIST_INDEXER_URL", "http://127.0.0.1:8083"), "the indexer's API (ARCHIVIST_INDEXER_URL)")
	agg := fs.String("aggregator", envOr("ARCHIVIST_AGGREGATOR_URL", "http://127.0.0.1:8084"), "the aggregator's API (ARCHIVIST_AGGREGATOR_URL)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "status":
		st, err := indexcmd.Status(ctx, *base)
		if err != nil {
			return err
		}
		gens, genErr := indexcmd.Generations(ctx, *agg)
		if *asJSON {
			if genErr != nil {
				return genErr
			}
			return printJSON(stdout, map[string]any{"files": st, "generations": gens})
		}
		return indexcmd.Print(stdout, st, gens, genErr, time.Now())
	case "reset", "retry": // retry: every pipeline's retry verb
		if fs.NArg() != 1 {
			return usage
		}
		if err := indexcmd.Reset(ctx, *base, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is due again\n", fs.Arg(0))
		return nil
	default:
		return usage
	}
}

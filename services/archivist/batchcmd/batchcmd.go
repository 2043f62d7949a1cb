// Package batchcmd is `archivist batch`, `archivist job`, `archivist
// collection` and `archivist ingest`: submit batches, follow them, and the
// operator's actions, over the curator's ingest API.
package batchcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/httpapi"
)

// Base is the curator's API (ARCHIVIST_CURATOR_URL).
func Base() string {
	if v := os.Getenv("ARCHIVIST_CURATOR_URL"); v != "" {
		return v
	}
	return "http://127.0.0.1:8080"
}

// Usage is the commands' help, with the transition table.
func Usage() string {
	return `usage:
  archivist batch submit --profile P --payload URL --type TYPE [--submitter S] [--title T]
                         [--creator C] [--date D] [--callback URL] [--wait]
  archivist batch status ID [--json]
  archivist batch list [--state S] [--limit N] [--json]
  archivist job list [--state S] [--batch ID] [--limit N] [--json]
  archivist batch release|delete|update-reporting ID
  archivist job status ID [--json]
  archivist job hold|release|requeue|retry|delete ID   (retry: requeue)
  archivist collection hold|release PROFILE
  archivist ingest pause|resume | ingest cleanup [--older-than 24h]

types: ` + strings.Join(ingest.Types, ", ") + `
an action is refused from a state the table does not allow:

` + ingest.Help()
}

// Run runs one of the commands (args[0] is batch, job, collection or
// ingest).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprint(stderr, Usage())
		return fmt.Errorf("usage")
	}
	base := Base()
	what, verb, rest := args[0], args[1], args[2:]
	switch {
	case what == "batch" && verb == "submit":
		return submit(ctx, base, rest, stdout, stderr)
	case (what == "batch" || what == "job") && verb == "status":
		fs := flag.NewFlagSet(what+" status", flag.ContinueOnError)
		fs.SetOutput(stderr)
		asJSON := fs.Bool("json", false, "print JSON")
		id, err := parseID(fs, rest)
		if err != nil {
			return err
		}
		var st httpapi.Status
		if err := apiclient.Get(ctx, "curator", fmt.Sprintf("%s/v1/%s/%d", base, plural(what), id), &st); err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, st)
		}
		return Print(stdout, &st)
	case (what == "batch" || what == "job") && verb == "list":
		fs := flag.NewFlagSet(what+" list", flag.ContinueOnError)
		fs.SetOutput(stderr)
		asJSON := fs.Bool("json", false, "print JSON")
		state := fs.String("state", "", "only those in this state (failed, held, ...)")
		limit := fs.Int("limit", 100, "at most this many, the newest first")
		batch := fs.Int64("batch", 0, "jobs: only this batch's")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		u := fmt.Sprintf("%s/v1/%s?state=%s&limit=%d", base, plural(what), url.QueryEscape(*state), *limit)
		if what == "job" && *batch != 0 {
			u += fmt.Sprintf("&batch=%d", *batch)
		}
		var items []httpapi.Listed
		if err := apiclient.Get(ctx, "curator", u, &items); err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, items)
		}
		return PrintList(stdout, what, items)
	case what == "batch" || what == "job":
		if what == "job" && verb == "retry" {
			verb = "requeue" // every pipeline's retry verb (docs/RELIABILITY.md)
		}
		fs := flag.NewFlagSet(what+" "+verb, flag.ContinueOnError)
		fs.SetOutput(stderr)
		id, err := parseID(fs, rest)
		if err != nil {
			return err
		}
		var out map[string]any
		if err := apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/%s/%d/%s", base, plural(what), id, verb), nil, &out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %d is %v\n", what, id, out["state"])
		return nil
	case what == "collection" && (verb == "hold" || verb == "release") && len(rest) == 1:
		var out map[string]any
		if err := apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/collections/%s/%s", base, rest[0], verb), nil, &out); err != nil {
			return err
		}
		if verb == "hold" {
			fmt.Fprintf(stdout, "collection %s held\n", rest[0])
		} else {
			fmt.Fprintf(stdout, "collection %s released (%v batches and jobs back to pending)\n", rest[0], out["released"])
		}
		return nil
	case what == "ingest" && (verb == "pause" || verb == "resume"):
		var out map[string]any
		if err := apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/ingest/%s", base, verb), nil, &out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ingest queue %sd\n", verb)
		return nil
	case what == "ingest" && verb == "cleanup":
		fs := flag.NewFlagSet("ingest cleanup", flag.ContinueOnError)
		fs.SetOutput(stderr)
		older := fs.Duration("older-than", 24*time.Hour, "completed this long ago")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		var out map[string]any
		if err := apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/ingest/cleanup?older_than=%s", base, *older), nil, &out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%v completed batches deleted\n", out["deleted_batches"])
		return nil
	}
	fmt.Fprint(stderr, Usage())
	return fmt.Errorf("unknown command %q", strings.Join(args[:2], " "))
}

// PrintList writes a list of batches or jobs for a person.
func PrintList(w io.Writer, what string, items []httpapi.Listed) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if what == "job" {
		fmt.Fprintf(tw, "JOB\tBATCH\tPROFILE\tLOCAL ID\tSTATE\tSINCE\tATTEMPTS\tERROR\n")
	} else {
		fmt.Fprintf(tw, "BATCH\tPROFILE\tSTATE\tSINCE\tATTEMPTS\tERROR\n")
	}
	for _, it := range items {
		why := it.Error
		if why == "" {
			why = it.LastAttemptError
		}
		since := it.StateAt.Format("2006-01-02 15:04")
		if what == "job" {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", it.ID, it.Batch, it.Profile, it.LocalID, it.State, since, it.Attempts, why)
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", it.ID, it.Profile, it.State, since, it.Attempts, why)
		}
	}
	if len(items) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	return tw.Flush()
}

func plural(what string) string {
	if what == "batch" {
		return "batches"
	}
	return "jobs"
}

func parseID(fs *flag.FlagSet, args []string) (int64, error) {
	// The id may come before or after the flags.
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return 0, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return 0, fmt.Errorf("%s takes one id", fs.Name())
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%s: %q is not an id", fs.Name(), pos[0])
	}
	return id, nil
}

func submit(ctx context.Context, base string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("batch submit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s ingest.Submission
	fs.StringVar(&s.Profile, "profile", "", "the collection (profile)")
	fs.StringVar(&s.PayloadURL, "payload", "", "the payload URL")
	fs.StringVar(&s.Type, "type", "", strings.Join(ingest.Types, ", "))
	fs.StringVar(&s.Submitter, "submitter", "", "the depositor an operator submits for (default: the API key's holder; a publisher deposits only as itself)")
	fs.StringVar(&s.Title, "title", "", "title (ERC what)")
	fs.StringVar(&s.Creator, "creator", "", "creator (ERC who)")
	fs.StringVar(&s.Date, "date", "", "date (ERC when)")
	fs.StringVar(&s.CallbackURL, "callback", "", "URL told of each job's end")
	wait := fs.Bool("wait", false, "follow the batch with a progress bar until it ends")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var out struct {
		Batch int64 `json:"batch"`
	}
	if err := apiclient.Post(ctx, "curator", base+"/v1/batches", s, &out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "batch %d submitted\n", out.Batch)
	if !*wait {
		return nil
	}
	return Follow(ctx, base, out.Batch, stdout, 200*time.Millisecond)
}

// Follow draws the batch's jobs by state as a progress bar until the batch
// completes, fails or is held, then prints its status.
func Follow(ctx context.Context, base string, id int64, w io.Writer, every time.Duration) error {
	for {
		var st httpapi.Status
		if err := apiclient.Get(ctx, "curator", fmt.Sprintf("%s/v1/batches/%d", base, id), &st); err != nil {
			return err
		}
		fmt.Fprintf(w, "\r%s", Bar(&st, 40))
		switch st.State {
		case ingest.Completed, ingest.Failed, ingest.Held, ingest.Deleted:
			fmt.Fprintln(w)
			if err := Print(w, &st); err != nil {
				return err
			}
			if st.State != ingest.Completed {
				return fmt.Errorf("batch %d is %s", id, st.State)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// Bar is a one-line progress bar of a batch: done (completed) and failed
// jobs over all, and the count in each state.
func Bar(st *httpapi.Status, width int) string {
	total := 0
	for _, n := range st.Jobs {
		total += n
	}
	done, failed := st.Jobs[ingest.Completed], st.Jobs[ingest.Failed]
	filled, bad := 0, 0
	if total > 0 {
		filled = done * width / total
		bad = failed * width / total
	}
	bar := strings.Repeat("#", filled) + strings.Repeat("x", bad) + strings.Repeat(".", max(width-filled-bad, 0))
	var states []string
	for _, s := range ingest.JobSteps {
		if n := st.Jobs[s]; n > 0 {
			states = append(states, fmt.Sprintf("%s %d", s, n))
		}
	}
	if failed > 0 {
		states = append(states, fmt.Sprintf("failed %d", failed))
	}
	return fmt.Sprintf("batch %d [%s] %d/%d %s %s", st.ID, bar, done, total, st.State, strings.Join(states, ", "))
}

// Print writes a status: state, jobs by state, history, report summary.
func Print(w io.Writer, st *httpapi.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s %d\t%s\tcollection %s\n", st.Entity, st.ID, st.State, st.Profile)
	if st.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", st.Error)
	}
	if st.Job != nil {
		j := st.Job
		fmt.Fprintf(tw, "batch\t%d\n", j.BatchID)
		fmt.Fprintf(tw, "priority\t%d\n", j.Priority)
		fmt.Fprintf(tw, "ark\t%s\n", j.ARK)
		fmt.Fprintf(tw, "retries\t%d\n", j.RetryCount)
		fmt.Fprintf(tw, "files\t%d\n", len(j.Files))
	}
	if len(st.Jobs) > 0 {
		var states []string
		for s := range st.Jobs {
			states = append(states, string(s))
		}
		slices.Sort(states)
		fmt.Fprint(tw, "jobs")
		for _, s := range states {
			fmt.Fprintf(tw, "\t%s %d\n", s, st.Jobs[ingest.State(s)])
		}
	}
	fmt.Fprintln(tw, "history")
	for _, h := range st.History {
		fmt.Fprintf(tw, "  %s\t%s -> %s\t%s %s\t%s\n", h.At.Local().Format("2006-01-02 15:04:05.000"), h.From, h.To, h.By, h.Action, h.Detail)
	}
	if len(st.Report) > 0 {
		fmt.Fprintf(tw, "report\t%s\n", strings.TrimSpace(string(st.Report)))
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := newEncoder(w)
	return enc.Encode(v)
}

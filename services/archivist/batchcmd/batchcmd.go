// Package batchcmd is `archivist batch`, `archivist job`, `archivist
// collection` and `archivist ingest`: submit batches, follow them, and the
// operator's actions, over the curator's ingest API.
package batchcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/notify"
	"github.com/archivist/archivist/services/curator/ingest/views"
	"github.com/archivist/archivist/services/curator/ingest/withdraw"
)

// Base is the curator's API (ARCHIVIST_CURATOR_URL).
func Base() string {
	if v := os.Getenv("ARCHIVIST_CURATOR_URL"); v != "" {
		return v
	}
	return "http://127.0.0.1:8080"
}

// Transitions is the transition table as help text: the types a batch
// may be, and the moves each action makes.
func Transitions() string {
	return "types: " + strings.Join(ingest.Types, ", ") + "\n" +
		"an action is refused from a state the table does not allow:\n\n" + ingest.Help()
}

// Plural is the API's collection of what ("batch" or "job").
func Plural(what string) string {
	if what == "batch" {
		return "batches"
	}
	return "jobs"
}

// Status reads a batch's or job's status.
func Status(ctx context.Context, base, what string, id int64) (*views.Status, error) {
	var st views.Status
	if err := apiclient.Get(ctx, "curator", fmt.Sprintf("%s/v1/%s/%d", base, Plural(what), id), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// List lists batches or jobs: of state (any if ""), of batch (jobs; any
// if 0), at most limit, the newest first.
func List(ctx context.Context, base, what string, state string, batch int64, limit int) ([]views.Listed, error) {
	u := fmt.Sprintf("%s/v1/%s?state=%s&limit=%d", base, Plural(what), url.QueryEscape(state), limit)
	if what == "job" && batch != 0 {
		u += fmt.Sprintf("&batch=%d", batch)
	}
	var items []views.Listed
	if err := apiclient.Get(ctx, "curator", u, &items); err != nil {
		return nil, err
	}
	return items, nil
}

// Act makes an operator's action on a batch or job and returns the state
// it reached; confirmed says the operator confirmed it (deleting a job of
// a batch not yet reported).
func Act(ctx context.Context, base, what string, id int64, action string, confirmed bool) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	u := fmt.Sprintf("%s/v1/%s/%d/%s", base, Plural(what), id, action)
	if confirmed {
		u += "?confirm=true"
	}
	err := apiclient.Post(ctx, "curator", u, nil, &out)
	return out.State, err
}

// Collection holds or releases a collection (action "hold" or
// "release"); a release returns how many batches and jobs went back to
// pending.
func Collection(ctx context.Context, base, profile, action string) (int, error) {
	var out struct {
		Released int `json:"released"`
	}
	err := apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/collections/%s/%s", base, url.PathEscape(profile), action), nil, &out)
	return out.Released, err
}

// Queue pauses or resumes the whole ingest queue (action "pause" or
// "resume").
func Queue(ctx context.Context, base, action string) error {
	return apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/ingest/%s", base, action), nil, &map[string]any{})
}

// Cleanup deletes the batches completed longer ago than olderThan and
// returns how many.
func Cleanup(ctx context.Context, base string, olderThan time.Duration) (int, error) {
	var out struct {
		Deleted int `json:"deleted_batches"`
	}
	err := apiclient.Post(ctx, "curator", fmt.Sprintf("%s/v1/ingest/cleanup?older_than=%s", base, olderThan), nil, &out)
	return out.Deleted, err
}

// Submit submits a batch and returns its id.
func Submit(ctx context.Context, base string, s ingest.Submission) (int64, error) {
	var out struct {
		Batch int64 `json:"batch"`
	}
	if err := apiclient.Post(ctx, "curator", base+"/v1/batches", s, &out); err != nil {
		return 0, err
	}
	return out.Batch, nil
}

// PrintList writes a list of batches or jobs for a person.
func PrintList(w io.Writer, what string, items []views.Listed) error {
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

// Follow draws the batch's jobs by state as a progress bar until the batch
// completes, fails or is held, then prints its status.
func Follow(ctx context.Context, base string, id int64, w io.Writer, every time.Duration) error {
	for {
		var st views.Status
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
func Bar(st *views.Status, width int) string {
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
func Print(w io.Writer, st *views.Status) error {
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

// Profiles reads the notification settings of every collection set.
func Profiles(ctx context.Context, base string) ([]notify.Settings, error) {
	var out []notify.Settings
	err := apiclient.Get(ctx, "curator", base+"/v1/profiles", &out)
	return out, err
}

// Profile reads a collection's notification settings.
func Profile(ctx context.Context, base, profile string) (*notify.Settings, error) {
	var st notify.Settings
	if err := apiclient.Get(ctx, "curator", base+"/v1/profiles/"+url.PathEscape(profile), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// SetProfile sets a collection's notification settings.
func SetProfile(ctx context.Context, base string, st notify.Settings) error {
	return apiclient.Do(ctx, "curator", http.MethodPut, base+"/v1/profiles/"+url.PathEscape(st.Profile), st, &notify.Settings{})
}

// PrintProfiles writes settings for a person.
func PrintProfiles(w io.Writer, list []notify.Settings) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLLECTION\tEMAILS\tCONFIRM\tREPORT\tCALLBACK")
	for _, st := range list {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\n", st.Profile, strings.Join(st.Emails, ", "), st.Confirm, st.Report, st.CallbackURL)
	}
	if len(list) == 0 {
		fmt.Fprintln(tw, "(none set)")
	}
	return tw.Flush()
}

// Withdraw withdraws an object (version 0) or one version of it.
func Withdraw(ctx context.Context, base, ark string, version int, reason string) (*withdraw.Result, error) {
	var out withdraw.Result
	err := apiclient.Post(ctx, "curator", base+"/v1/objects/withdraw", withdraw.Request{ARK: ark, Version: version, Reason: reason}, &out)
	return &out, err
}

// Reinstate lets a withdrawn object take deposits again.
func Reinstate(ctx context.Context, base, ark, reason string) (*withdraw.Object, error) {
	var out withdraw.Object
	err := apiclient.Post(ctx, "curator", base+"/v1/objects/reinstate", withdraw.Request{ARK: ark, Reason: reason}, &out)
	return &out, err
}

// Object reads an object from the inventory, withdrawn versions as
// tombstones.
func Object(ctx context.Context, base, ark string) (*withdraw.Object, error) {
	var out withdraw.Object
	if err := apiclient.Get(ctx, "curator", base+"/v1/objects?ark="+url.QueryEscape(ark), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PrintObject writes an object and its versions for a person.
func PrintObject(w io.Writer, o *withdraw.Object) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tcollection %s\tlocal id %s\t%s\n", o.ARK, o.Profile, o.LocalID, o.Title)
	if o.WithdrawnAt != nil {
		fmt.Fprintf(tw, "withdrawn\t%s\t%s\n", o.WithdrawnAt.Format(time.RFC3339), o.WithdrawnReason)
	}
	fmt.Fprintln(tw, "VERSION\tJOB\tCREATED\tFILES\tWITHDRAWN")
	for _, v := range o.Versions {
		gone := ""
		if v.WithdrawnAt != nil {
			gone = v.WithdrawnAt.Format(time.RFC3339) + " " + v.WithdrawnReason
		}
		fmt.Fprintf(tw, "v%d\t%d\t%s\t%d\t%s\n", v.Version, v.JobID, v.CreatedAt.Format(time.RFC3339), v.Files, gone)
	}
	return tw.Flush()
}

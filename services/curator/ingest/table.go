// Package ingest is how material enters the archive
// (ingest-queue-state-transitions.txt, with a storing state between
// processing and recording): batches of jobs move through a state machine
// whose every transition is one PostgreSQL transaction, claimed by daemons
// with session locks that die with their worker.
//
// This package is the state machine and its store: the transition table
// (table.go), the one place that says what may happen, and the batches and
// jobs in PostgreSQL (store.go, submission.go, admin.go, and jobs.go: the
// typed statements the other rooms call). It alone writes its tables; the
// rest is in rooms by concern:
//
//   - daemon: the state daemons, their claims, retries and fencing;
//   - pipeline: what each state does (read the payload, estimate,
//     provision, download, unpack, mint, store, record, notify, report);
//   - fetch: the safe HTTP client every request to a depositor goes through;
//   - manifest: checkm manifests and the names an object may hold;
//   - container: zip containers, checked before they are unpacked;
//   - identifier: the ARK minters (local, EZID);
//   - inventory: what an object version is made of;
//   - workarea: the working area's job directories, room and tidying;
//   - notify: the collections' notification settings and mails;
//   - withdraw: objects and versions withdrawn, their tombstones;
//   - report: a batch's report;
//   - views: what people see of batches and jobs (lists, status, place
//     in the queue, counts and the backlog gauges);
//   - httpapi: the HTTP API;
//   - origin: a depositor's origin server in small, for dev and tests.
package ingest

import (
	"fmt"
	"slices"
	"strings"
)

// State is a batch's or a job's state.
type State string

// Batch and job states. Batches use pending, held, processing, reporting,
// update_reporting, completed, failed and deleted; jobs the rest and
// pending, held, processing, completed, failed and deleted.
const (
	Pending         State = "pending"
	Held            State = "held"
	Estimating      State = "estimating"
	Provisioning    State = "provisioning"
	Downloading     State = "downloading"
	Processing      State = "processing"
	Storing         State = "storing"
	Recording       State = "recording"
	Notify          State = "notify"
	Reporting       State = "reporting"
	UpdateReporting State = "update_reporting"
	Completed       State = "completed"
	Failed          State = "failed"
	Deleted         State = "deleted"
)

// Entity is what a transition moves: a batch or a job.
type Entity string

// The entities.
const (
	Batch Entity = "batch"
	Job   Entity = "job"
)

// By says who makes a transition.
type By string

// Who makes transitions.
const (
	// Daemon: the state's daemon, as the outcome of its work.
	Daemon By = "daemon"
	// Admin: an operator's action (CLI or HTTP).
	Admin By = "admin"
	// Auto: an automated task (cleanup) or an event (the batch's last job
	// leaving processing).
	Auto By = "auto"
)

// Transition is one allowed move.
type Transition struct {
	Entity Entity
	From   State
	To     State
	By     By
	// Action is the admin action's name (release, requeue, delete,
	// update-reporting) or the daemon's reason.
	Action string
	// Doc is the spec's description, for help and reports.
	Doc string
}

// Transitions is the state machine, as data: the daemons, the admin
// actions, the CLI's help and the tests all read it. A move not here is
// refused.
var Transitions = []Transition{
	{Batch, Pending, Held, Daemon, "collection-held", "a hold is in place on the batch's collection"},
	{Batch, Pending, Processing, Daemon, "jobs-created", "the payload is read and one job per object is queued"},
	{Batch, Pending, Failed, Daemon, "bad-payload", "the payload or its manifest cannot be read"},
	{Batch, Held, Pending, Admin, "release", "the hold is released"},
	{Batch, Processing, Reporting, Auto, "jobs-done", "no job of the batch is left in processing"},
	{Batch, Reporting, Completed, Daemon, "reported", "every job completed; the report is written"},
	{Batch, Reporting, Failed, Daemon, "reported-failures", "some job failed; the report says which"},
	{Batch, Failed, UpdateReporting, Admin, "update-reporting", "report again after failed jobs were requeued or deleted"},
	{Batch, UpdateReporting, Completed, Daemon, "reported", "every remaining job completed"},
	{Batch, UpdateReporting, Failed, Daemon, "reported-failures", "some job is still failed"},
	{Batch, Failed, Deleted, Admin, "delete", "the failed batch and its jobs are deleted"},
	{Batch, Held, Deleted, Admin, "delete", "the held batch is deleted"},
	{Batch, Completed, Deleted, Auto, "cleanup", "completed batches are cleaned up"},

	{Job, Pending, Held, Daemon, "collection-held", "a hold is in place on the job's collection"},
	{Job, Pending, Estimating, Daemon, "acquired", "the job is acquired"},
	{Job, Pending, Failed, Daemon, "bad-job", "the job's data cannot be read"},
	{Job, Held, Pending, Admin, "release", "the hold is released"},
	{Job, Pending, Held, Admin, "hold", "an operator holds the job"},
	{Job, Estimating, Provisioning, Daemon, "estimated", "sizes are known (0 if they cannot be); a very large job may get a lower priority; never fails"},
	{Job, Provisioning, Downloading, Daemon, "provisioned", "the working area has room for the job"},
	{Job, Downloading, Processing, Daemon, "downloaded", "every file is downloaded and its digest checked"},
	{Job, Downloading, Failed, Daemon, "download-failed", "a download failed after its retries, or a digest or size did not match"},
	{Job, Processing, Storing, Daemon, "processed", "ARK minted, ERC and Dublin Core written, storage manifest built"},
	{Job, Processing, Failed, Daemon, "processing-failed", "a corrupt container or manifest"},
	{Job, Storing, Recording, Daemon, "stored", "every file and the manifest are in the blob store"},
	{Job, Storing, Failed, Daemon, "storing-failed", "the blob store refused a file"},
	{Job, Recording, Notify, Daemon, "recorded", "the inventory holds the object; archive.object.recorded is published"},
	{Job, Recording, Failed, Daemon, "recording-failed", "the inventory could not be written"},
	{Job, Notify, Completed, Daemon, "notified", "the profile's callback was told (or it has none)"},
	{Job, Notify, Failed, Daemon, "notify-failed", "the callback failed after its retries"},
	{Job, Failed, Downloading, Admin, "requeue", "requeued: the last successful state was provisioning"},
	{Job, Failed, Processing, Admin, "requeue", "requeued: the last successful state was downloading"},
	{Job, Failed, Storing, Admin, "requeue", "requeued: the last successful state was processing"},
	{Job, Failed, Recording, Admin, "requeue", "requeued: the last successful state was storing"},
	{Job, Failed, Notify, Admin, "requeue", "requeued: the last successful state was recording"},
	{Job, Completed, Deleted, Auto, "cleanup", "completed jobs are cleaned up with their batch"},
	{Job, Failed, Deleted, Admin, "delete", "the failed job is deleted"},
	{Job, Held, Deleted, Admin, "delete", "the held job is deleted"},
}

// JobSteps are the job states a daemon works, in order.
var JobSteps = []State{Pending, Estimating, Provisioning, Downloading, Processing, Storing, Recording, Notify}

// Allowed finds the transition of e from one state to another.
func Allowed(e Entity, from, to State) (Transition, bool) {
	for _, t := range Transitions {
		if t.Entity == e && t.From == from && t.To == to {
			return t, true
		}
	}
	return Transition{}, false
}

// AllowedBy is the transition from one state to another made by by.
func AllowedBy(e Entity, from, to State, by By) (Transition, bool) {
	for _, t := range Transitions {
		if t.Entity == e && t.From == from && t.To == to && t.By == by {
			return t, true
		}
	}
	return Transition{}, false
}

// AdminMoves lists the admin action's moves for an entity.
func AdminMoves(e Entity, action string) []Transition {
	var out []Transition
	for _, t := range Transitions {
		if t.Entity == e && t.By == Admin && t.Action == action {
			out = append(out, t)
		}
	}
	return out
}

// RefusedError is an action refused from a state the table does not allow.
type RefusedError struct {
	Entity Entity
	ID     int64
	Action string
	State  State
}

func (e *RefusedError) Error() string {
	var from []string
	for _, t := range AdminMoves(e.Entity, e.Action) {
		if !slices.Contains(from, string(t.From)) {
			from = append(from, string(t.From))
		}
	}
	if len(from) == 0 {
		return fmt.Sprintf("%s %d: %q is not an action on a %s", e.Entity, e.ID, e.Action, e.Entity)
	}
	return fmt.Sprintf("%s %d is %s: %s is allowed only from %s", e.Entity, e.ID, e.State, e.Action, strings.Join(from, " or "))
}

// Help is the table as text, for the CLI.
func Help() string {
	var b strings.Builder
	for _, e := range []Entity{Batch, Job} {
		fmt.Fprintf(&b, "%s transitions:\n", e)
		for _, t := range Transitions {
			if t.Entity != e {
				continue
			}
			who := string(t.By)
			if t.By == Admin {
				who = "admin: " + t.Action
			}
			fmt.Fprintf(&b, "  %-16s -> %-16s %-24s %s\n", t.From, t.To, who, t.Doc)
		}
	}
	return b.String()
}

package report_test

import (
	"reflect"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/report"
)

// TestWhatChangedSinceTheLastReport: after failed jobs were requeued and
// one deleted, the next report lists, by job, what each was and is now;
// a job the same in both is not listed.
func TestWhatChangedSinceTheLastReport(t *testing.T) {
	first := &report.Report{
		Objects: []report.ReportedObject{{Job: 1, Version: 1}},
		Failed:  []report.FailedJob{{Job: 2, State: ingest.Downloading}, {Job: 3, State: ingest.Processing}, {Job: 4, State: ingest.Storing}},
	}
	next := &report.Report{
		Objects: []report.ReportedObject{{Job: 1, Version: 1}, {Job: 2, Version: 2}},
		Failed:  []report.FailedJob{{Job: 3, State: ingest.Storing}},
	}
	want := []report.JobChange{
		{Job: 2, Was: "failed in downloading", Now: "completed v2"},
		{Job: 3, Was: "failed in processing", Now: "failed in storing"},
		{Job: 4, Was: "failed in storing", Now: "not reported"},
	}
	if got := next.ChangesSince(first); !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
	if got := first.ChangesSince(first); len(got) != 0 {
		t.Fatalf("a report against itself: %+v", got)
	}
}

// TestTheBatchsMoveOnceReported: completed when every job completed or
// was deleted, else failed saying how many are not; a later report says
// how many changed since the one before.
func TestTheBatchsMoveOnceReported(t *testing.T) {
	done := &report.Report{Jobs: map[ingest.State]int{ingest.Completed: 3, ingest.Deleted: 1}, Objects: make([]report.ReportedObject, 3)}
	if to, detail := done.Outcome(); to != ingest.Completed || detail != "3 objects" {
		t.Errorf("all done: %s %q", to, detail)
	}
	some := &report.Report{Jobs: map[ingest.State]int{ingest.Completed: 3, ingest.Failed: 2}, Sequence: 2,
		Changes: []report.JobChange{{Job: 9}}}
	if to, detail := some.Outcome(); to != ingest.Failed || detail != "2 of 5 jobs not completed; 1 changed since report 1" {
		t.Errorf("some failed: %s %q", to, detail)
	}
}

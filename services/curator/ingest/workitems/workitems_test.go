package workitems_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/workitems"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig is the curator's schema with batches and jobs in it, and the work
// kit over ingest's sources.
func rig(t testing.TB) (*work.Store, *pgxpool.Pool) {
	t.Helper()
	db, err := pgxpool.New(context.Background(), testenv.DBURL(t, migrations.Schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return &work.Store{DB: db, Schema: "curator", Sources: workitems.Sources(ingest.NewStore(db))}, db
}

// batch adds a processing batch of submitter in collection with jobs: n
// failed after provisioning ("origin timed out"), one failed before any
// step succeeded, and two completed.
func batch(t testing.TB, db *pgxpool.Pool, submitter, collection string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	if err := db.QueryRow(ctx, `INSERT INTO curator.batches (submitter, profile, payload_url, type, state)
		VALUES ($1, $2, 'https://depositor.example/' || $2, 'manifest', 'processing') RETURNING id`, submitter, collection).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO curator.jobs (batch_id, submitter, profile, kind, payload_url, state, last_successful, error, ark, local_id)
		SELECT $1::bigint, $2, $3, 'file', 'https://depositor.example/' || $3 || '/' || g, 'failed', 'provisioning',
			'download: origin timed out after 3 attempts', 'ark:/99999/fk4' || $3 || g, $3 || '-' || g
		FROM generate_series(1, $4::int) g
		UNION ALL SELECT $1::bigint, $2::text, $3::text, 'file', 'https://depositor.example/bad', 'failed', '', 'the job cannot be read', '', ''
		UNION ALL SELECT $1::bigint, $2::text, $3::text, 'file', 'https://depositor.example/ok' || g, 'completed', 'notify', '', '', '' FROM generate_series(1, 2) g`,
		id, submitter, collection, n); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestFailedJobsOfACollectionAreFoundAndRetried: failed jobs in two
// collections; a collection and a state find exactly that collection's;
// the dry run counts those a retry moves (not the one with no step to
// restart at); the retry moves them to the step after their last
// successful one, each with the action in its history.
func TestFailedJobsOfACollectionAreFoundAndRetried(t *testing.T) {
	ctx := context.Background()
	s, db := rig(t)
	batch(t, db, "alice", "maps", 5)
	batch(t, db, "bob", "films", 3)

	f := work.Filter{Pipeline: "ingest", Kind: "job", Collection: "maps", States: []string{"failed"}}
	p, err := s.Find(ctx, f, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 6 {
		t.Fatalf("found %d failed jobs of maps, want 6", len(p.Items))
	}
	for _, it := range p.Items {
		if it.Collection != "maps" || it.State != "failed" || it.Submitter != "alice" || it.Reason == "" {
			t.Fatalf("item %+v", it)
		}
	}
	// By words of the error, by ARK, by local id.
	for q, want := range map[string]int{"timed out": 8, "ark:/99999/fk4films2": 1, "maps-4": 1, "cannot": 2} {
		if p, err := s.Find(ctx, work.Filter{Query: q}, "", 100); err != nil || len(p.Items) != want {
			t.Errorf("query %q: %d items, want %d (%v)", q, len(p.Items), want, err)
		}
	}

	c, err := s.DryRun(ctx, work.Retry, f)
	if err != nil || c.N != 5 || c.ByKind["ingest/job"] != 5 {
		t.Fatalf("dry run: %+v, %v", c, err)
	}
	a, err := s.Act(ctx, work.Retry, f, c.N, "ops")
	if err != nil || a.Moved != 5 {
		t.Fatalf("retry: %+v, %v", a, err)
	}
	var downloading, histories, films int
	db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE profile = 'maps' AND state = 'downloading' AND retry_count = 1`).Scan(&downloading)
	db.QueryRow(ctx, `SELECT count(*) FROM curator.ingest_history WHERE entity = 'job' AND to_state = 'downloading' AND detail = $1`,
		fmt.Sprintf("work action %d by ops", a.ID)).Scan(&histories)
	db.QueryRow(ctx, `SELECT count(*) FROM curator.jobs WHERE profile = 'films' AND state = 'failed'`).Scan(&films)
	if downloading != 5 || histories != 5 || films != 4 {
		t.Fatalf("after the retry: %d maps jobs downloading, %d histories, %d films jobs failed (want 5, 5, 4)", downloading, histories, films)
	}
	// The queues' flow: 14 jobs came in (all in this test), 9 left (the
	// completed and the failed), 5 wait (the retried).
	rates, err := s.Rates(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rates {
		if r.Kind == "job" && (r.In == nil || *r.In != 14 || r.Out != 9 || r.Backlog != 5 || r.DrainSeconds == nil) {
			t.Errorf("jobs' rates %+v", r)
		}
	}
	// Delete: the failed job that cannot be retried.
	del := work.Filter{Kind: "job", Query: "cannot", Collection: "maps"}
	if c, err := s.DryRun(ctx, work.Delete, del); err != nil || c.N != 1 {
		t.Fatalf("dry-run delete: %+v, %v", c, err)
	}
	if _, err := s.Act(ctx, work.Delete, del, 1, "ops"); err != nil {
		t.Fatal(err)
	}
	// A batch with jobs at work is not deleted; its held sibling is.
	if c, err := s.DryRun(ctx, work.Delete, work.Filter{Kind: "batch"}); err != nil || c.N != 0 {
		t.Fatalf("batches with jobs at work, to delete: %+v, %v", c, err)
	}
}

// TestParkedMailsAreSentAgain: mails the sender parked are found by
// collection; a resend of what a dry run counted has the sender try them
// again now; a publisher's filter reaches only its own batches' mails.
func TestParkedMailsAreSentAgain(t *testing.T) {
	ctx := context.Background()
	s, db := rig(t)
	maps := batch(t, db, "alice", "maps", 1)
	films := batch(t, db, "bob", "films", 1)
	for _, b := range []int64{maps, maps, films} {
		if _, err := db.Exec(ctx, `INSERT INTO curator.mail_outbox (batch_id, kind, recipients, subject, body, message_id, attempts, last_error, parked_at, first_failed_at)
			VALUES ($1, 'report', '{curator@example.org}', 'Batch report', 'body', gen_random_uuid()::text, 5, 'smtp: 550 mailbox unavailable', now(), now())`, b); err != nil {
			t.Fatal(err)
		}
	}
	f := work.Filter{Pipeline: "mail", Collection: "maps", States: []string{"parked"}}
	if p, err := s.Find(ctx, f, "", 10); err != nil || len(p.Items) != 2 || p.Items[0].Verbs[0] != work.Delete || p.Items[0].Verbs[1] != work.Resend {
		t.Fatalf("parked mails of maps: %+v, %v", p.Items, err)
	}
	if c, err := s.DryRun(ctx, work.Resend, work.Filter{Pipeline: "mail", Submitter: "bob"}); err != nil || c.N != 1 {
		t.Fatalf("bob's parked mails: %+v, %v", c, err)
	}
	if _, err := s.Act(ctx, work.Resend, f, 2, "ops"); err != nil {
		t.Fatal(err)
	}
	var due int
	db.QueryRow(ctx, `SELECT count(*) FROM curator.mail_outbox WHERE parked_at IS NULL AND attempts = 0 AND next_attempt_at <= now()`).Scan(&due)
	if due != 2 {
		t.Fatalf("%d mails due after the resend, want 2", due)
	}
}

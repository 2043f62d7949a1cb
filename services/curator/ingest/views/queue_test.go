package views_test

import (
	"context"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/views"
	"github.com/archivist/archivist/services/curator/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestABatchKnowsItsPlaceInTheQueue: a depositor's batch of 3 pending
// jobs behind 4 pending jobs of another's, with 20 jobs ended in the last
// 10 minutes (2 a minute): 3 left, 4 ahead, done in about 3.5 minutes.
func TestABatchKnowsItsPlaceInTheQueue(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t, migrations.Schema)
	var first, mine int64
	for _, b := range []struct {
		id                *int64
		submitter         string
		pending, finished int
	}{{&first, "tv", 4, 20}, {&mine, "radio", 3, 0}} {
		if err := db.QueryRow(ctx, `INSERT INTO curator.batches (submitter, profile, payload_url, type, state)
			VALUES ($1, $1, 'https://depositor.example/', 'manifest', 'processing') RETURNING id`, b.submitter).Scan(b.id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO curator.jobs (batch_id, submitter, profile, kind, payload_url, state)
			SELECT $1::bigint, $2::text, $2::text, 'file', 'https://depositor.example/f', 'pending' FROM generate_series(1, $3::int)
			UNION ALL SELECT $1::bigint, $2::text, $2::text, 'file', 'https://depositor.example/f', 'completed' FROM generate_series(1, $4::int)`,
			*b.id, b.submitter, b.pending, b.finished); err != nil {
			t.Fatal(err)
		}
	}
	st, err := views.StatusOf(ctx, ingest.NewStore(db), ingest.Batch, mine)
	if err != nil {
		t.Fatal(err)
	}
	q := st.Queue
	if q == nil || q.JobsLeft != 3 || q.JobsAhead != 4 || q.JobsPerMinute != 2 || q.EstimatedEnd == nil {
		t.Fatalf("queue %+v", q)
	}
	if d := time.Until(*q.EstimatedEnd); d < 3*time.Minute || d > 4*time.Minute {
		t.Errorf("estimated end in %s, want about 3.5 minutes", d)
	}
	if st, _ := views.StatusOf(ctx, ingest.NewStore(db), ingest.Batch, first); st.Queue == nil || st.Queue.JobsAhead != 0 {
		t.Errorf("the first batch's queue %+v", st.Queue)
	}
}

package auditor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/services/auditor/auditor"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// TestTheSecondCopyOnMinIO (#49): on a real S3 server, a primary and a
// secondary bucket. A recorded object is copied to the second copy; its
// bytes replaced in the primary by a plain S3 client are found by the
// next check and repaired from the second copy (AUDITOR_AUTO_REPAIR); a
// deleted object is deleted from the second copy, and a copy delivered
// after its deletion does not write it back.
func TestTheSecondCopyOnMinIO(t *testing.T) {
	ctx := context.Background()
	primary, primaryBucket := testenv.MinIOBucket(t, "")
	secondary, secondaryBucket := testenv.MinIOBucket(t, "")
	m := testenv.MinIO(t)
	raw, err := m.Client()
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	sh := testenv.Shared{NATSURL: testenv.NATS(t), DBURL: testenv.DBURL(t, migrations.Schema), Blob: primary}
	testenv.StartServiceIn(t, auditor.Definition(), sh, map[string]string{
		"AUDITOR_HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", port), "AUDITOR_CYCLE": "1h", "AUDITOR_SCHEDULE_TICK": "100ms",
		"AUDITOR_IDLE_BACKOFF_MIN": "50ms", "AUDITOR_IDLE_BACKOFF_MAX": "200ms", "AUDITOR_RETRY_DELAY": "100ms",
		"AUDITOR_SECONDARY_BLOB_URL": m.URL(secondaryBucket, ""), "AUDITOR_SECONDARY_S3_ACCESS_KEY_ID": m.AccessKey,
		"AUDITOR_SECONDARY_S3_SECRET_ACCESS_KEY": m.SecretKey, "AUDITOR_AUTO_REPAIR": "objects/",
		"AUDITOR_SECONDARY_CYCLE": "2s", "AUDITOR_SECONDARY_CHECK": "read",
	})
	b := testenv.BusAt(t, sh.NATSURL, "ingest")
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, cond)
	}
	read := func(s blob.Store, key string) (string, error) {
		rc, _, err := s.Get(ctx, key)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		return string(got), err
	}
	record := func(key, content string, at time.Time) {
		t.Helper()
		env, _ := events.NewAt("ingest", at, &events.ObjectRecorded{Object: key, SHA256: sum(content), Size: int64(len(content))})
		if err := b.PublishBatch(ctx, []bus.Outgoing{{Subject: events.SubjectObjectRecorded, Envelope: env}}); err != nil {
			t.Fatal(err)
		}
	}
	const key, content = "objects/ark:99999%2Ffk4kept/v1/producer/page.txt", "the page as deposited"
	if _, err := primary.Put(ctx, key, strings.NewReader(content), nil); err != nil {
		t.Fatal(err)
	}
	record(key, content, time.Now())
	waitFor("the copy in the secondary bucket", func() bool { got, _ := read(secondary, key); return got == content })

	// A plain S3 client replaces the primary's bytes.
	if _, err := raw.PutObject(ctx, primaryBucket, key, strings.NewReader("THE PAGE, CHANGED"), 17, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/check", port), "application/json", strings.NewReader(`{"space": "objects/"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor("the primary repaired from the second copy", func() bool { got, _ := read(primary, key); return got == content })

	// The second copy's own cycle: a file deleted from it, and one
	// replaced there, are found and copied back from the primary.
	if err := raw.RemoveObject(ctx, secondaryBucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the file deleted from the second copy copied back", func() bool { got, _ := read(secondary, key); return got == content })
	if _, err := raw.PutObject(ctx, secondaryBucket, key, strings.NewReader("sour in the copy"), -1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the file gone sour in the second copy copied back", func() bool { got, _ := read(secondary, key); return got == content })
	var status struct {
		CycleEnds  *time.Time `json:"cycle_ends"`
		SecondCopy *struct {
			Objects, Passes, Repaired int64
		} `json:"second_copy"`
	}
	// The bytes are back a moment before the repair's record commits, and
	// the status counts the repairs of the last cycle (2 s here): the
	// status is read until it shows the second repair, and the record of
	// both is the copy log's.
	waitFor("the second copy's audit in the status", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/audit/status", port))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&status)
		return status.SecondCopy != nil && status.SecondCopy.Passes > 0 && status.SecondCopy.Repaired >= 1
	})
	if status.CycleEnds == nil || status.CycleEnds.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("audit status: the primary's cycle ends %v, want the time its last object is due", status.CycleEnds)
	}
	if status.SecondCopy.Objects != 1 {
		t.Errorf("audit status of the second copy: %+v, want its one object", status.SecondCopy)
	}
	db, err := pgx.Connect(ctx, sh.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var missing, sour int
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome LIKE 'missing%copied back%'), count(*) FILTER (WHERE outcome NOT LIKE 'missing%' AND outcome LIKE '%copied back%')
		FROM auditor.copy_log WHERE object = $1`, key).Scan(&missing, &sour); err != nil || missing < 1 || sour < 1 {
		t.Errorf("the copy log: %d missing and %d sour files copied back (%v), want both", missing, sour, err)
	}

	// A deletion reaches the second copy; a copy delivered late does not
	// bring it back.
	const gone, goneContent = "objects/ark:99999%2Ffk4gone/v1/producer/page.txt", "withdrawn"
	if _, err := primary.Put(ctx, gone, bytes.NewReader([]byte(goneContent)), nil); err != nil {
		t.Fatal(err)
	}
	recordedAt := time.Now()
	record(gone, goneContent, recordedAt)
	waitFor("the withdrawn object's copy", func() bool { got, _ := read(secondary, gone); return got == goneContent })
	del, _ := events.New("curator", &events.ObjectDeleted{Object: gone})
	if err := b.PublishBatch(ctx, []bus.Outgoing{{Subject: events.SubjectObjectDeleted, Envelope: del}}); err != nil {
		t.Fatal(err)
	}
	waitFor("the withdrawn object gone from the second copy", func() bool { _, err := read(secondary, gone); return errors.Is(err, blob.ErrNotFound) })
	record(gone, goneContent, recordedAt) // the same recording, delivered again late
	time.Sleep(time.Second)
	if _, err := read(secondary, gone); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("a copy delivered after the deletion wrote the withdrawn object back: %v", err)
	}
}

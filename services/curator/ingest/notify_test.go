package ingest_test

import (
	"context"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/smtpsink"
	"github.com/archivist/archivist/services/curator/ingest"

	"github.com/archivist/archivist/devkit/testenv"
)

// mailRig is a curator whose mail goes to a real SMTP server in the test,
// with collection p's settings naming two addresses and a callback.
func mailRig(t *testing.T) (*rig, *origin, *smtpsink.Sink) {
	t.Helper()
	sink, err := smtpsink.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	r := newRig(t, map[string]string{"INGEST_SMTP_ADDR": sink.Addr, "INGEST_SMTP_PLAIN": "true", "INGEST_MAIL_FROM": "archive@example.org",
		"INGEST_RETRY_BUDGET": "1h"}) // a mail server refusing for a while never parks a mail here
	if code, out := r.call("PUT", "/v1/profiles/p", map[string]any{"emails": []string{"curator@example.org", "depositor@example.org"},
		"callback_url": r.cbURL, "confirm": true, "report": true}); code != http.StatusOK {
		t.Fatalf("settings: %d %v", code, out)
	}
	return r, newOrigin(t), sink
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// TestCollectionsAreToldByMail: a collection's settings have a batch that
// names no callback mail its confirmation when queued and its report when
// it ends to the collection's addresses, over SMTP, and call the
// collection's callback for each job and the report.
func TestCollectionsAreToldByMail(t *testing.T) {
	r, o, sink := mailRig(t)
	u, _ := o.manifest("mail", 3)
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: u, Type: "batch-manifest", Title: "Letters ✉"})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	waitFor(t, "two mails", func() bool { return len(sink.Messages()) >= 2 })
	msgs := sink.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d mails, want 2", len(msgs))
	}
	dec := func(h string) string { s, _ := new(mime.WordDecoder).DecodeHeader(h); return s }
	confirm, report := msgs[0], msgs[1]
	if s := dec(confirm.Header.Get("Subject")); !strings.Contains(s, "queued (3 objects, p)") || confirm.From != "archive@example.org" ||
		strings.Join(confirm.To, ",") != "curator@example.org,depositor@example.org" || !strings.Contains(confirm.Body, "3 object(s)") {
		t.Errorf("confirmation: %q from %s to %v:\n%s", s, confirm.From, confirm.To, confirm.Body)
	}
	if s := dec(report.Header.Get("Subject")); !strings.Contains(s, "completed") || !strings.Contains(report.Body, "3 objects") ||
		!strings.Contains(report.Body, "reports/batch-") {
		t.Errorf("report: %q:\n%s", s, report.Body)
	}
	if r.callback.Load() != 3 || r.reports.Load() != 1 {
		t.Errorf("the collection's callback was told of %d jobs and %d reports, want 3 and 1", r.callback.Load(), r.reports.Load())
	}
	if code, out := r.call("PUT", "/v1/profiles/p", map[string]any{"emails": []string{"Someone <x@example.org>"}}); code != http.StatusBadRequest || out["field"] != "emails" {
		t.Errorf("a named address: %d %v, want 400 on emails", code, out)
	}
}

// TestMailServerOutagesDelayMail: a mail server that refuses for now
// (421) delays the mails, which are tried again with the backoff and sent
// once it takes them; the batch is not held up. One that refuses for good
// (550) parks the mail with its reason, listed for operators.
func TestMailServerOutagesDelayMail(t *testing.T) {
	r, o, sink := mailRig(t)
	ctx := context.Background()
	sink.Refuse(421)
	u, _ := o.manifest("busy", 1)
	b := r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: u, Type: "batch-manifest"})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	waitFor(t, "failed attempts recorded", func() bool {
		var n int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.mail_outbox WHERE attempts >= 2 AND last_error LIKE '%421%' AND parked_at IS NULL`).Scan(&n)
		return n == 2
	})
	sink.Refuse(0)
	waitFor(t, "the delayed mails", func() bool { return len(sink.Messages()) == 2 })
	waitFor(t, "an empty outbox", func() bool {
		var n int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.mail_outbox`).Scan(&n)
		return n == 0
	})

	sink.Refuse(550)
	u, _ = o.manifest("refused", 1)
	b = r.submit(ingest.Submission{Submitter: "t", Profile: "p", PayloadURL: u, Type: "batch-manifest"})
	r.waitState(ingest.Batch, b, ingest.Completed, 30*time.Second)
	waitFor(t, "parked mails", func() bool {
		var n int
		r.db.QueryRow(ctx, `SELECT count(*) FROM curator.mail_outbox WHERE parked_at IS NOT NULL AND last_error LIKE '%550%'`).Scan(&n)
		return n == 2
	})
	code, _ := r.call("GET", "/v1/ingest/mail/parked", nil)
	if code != http.StatusOK {
		t.Errorf("parked mails: %d", code)
	}
}

package notify_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/smtpsink"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/services/curator/ingest/notify"
)

// TestMailGoesOverTLSOrNotAtAll (N37): a server that offers no STARTTLS
// gets no mail (its body would go in clear after a downgrade): a
// transient error naming INGEST_SMTP_PLAIN, nothing delivered; with
// AllowPlain (a relay on a trusted network) it is sent.
func TestMailGoesOverTLSOrNotAtAll(t *testing.T) {
	sink, err := smtpsink.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	m := notify.Mail{To: []string{"curator@example.org"}, Subject: "batch 1", Body: "titles of a depositor", ID: "batch-1"}
	s := &notify.SMTP{Addr: sink.Addr, From: "archive@example.org", Timeout: 10 * time.Second}
	err = s.Send(context.Background(), m)
	if !errors.Is(err, notify.ErrNoTLS) || fault.IsPermanent(err) {
		t.Errorf("a mail to a server without STARTTLS: %v, want ErrNoTLS, transient", err)
	}
	if n := len(sink.Messages()); n != 0 {
		t.Errorf("%d mails delivered in clear", n)
	}
	s.AllowPlain = true
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.Messages()); n != 1 {
		t.Errorf("%d mails delivered with AllowPlain, want 1", n)
	}
}

package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/fault"
)

// Mail is a plain-text message.
type Mail struct {
	To      []string
	Subject string
	Body    string
	// ID names it in its Message-ID (unique per mail: "batch-7-report-2").
	ID string
}

// Mailer sends mail.
type Mailer interface {
	Send(ctx context.Context, m Mail) error
}

// SMTP sends through an SMTP server (net/smtp): over STARTTLS, which a
// server must offer (reports would otherwise go in clear after a
// downgrade) unless AllowPlain is set; PLAIN authentication when User is
// set (which net/smtp allows only over TLS or to this machine). A refusal with a 5xx code is permanent; a 4xx
// code, or a server that cannot be reached, transient.
type SMTP struct {
	// Addr is the server, host:port (INGEST_SMTP_ADDR).
	Addr string
	// From is the sender (INGEST_MAIL_FROM).
	From string
	// User and Password authenticate (INGEST_SMTP_USER, INGEST_SMTP_PASSWORD).
	User, Password string
	// Timeout bounds one mail's whole conversation (default one minute).
	Timeout time.Duration
	// AllowPlain sends without TLS to a server that offers no STARTTLS
	// (INGEST_SMTP_PLAIN; a relay on a trusted network).
	AllowPlain bool
}

// ErrNoTLS is an SMTP server that offers no STARTTLS.
var ErrNoTLS = errors.New("the SMTP server offers no STARTTLS: mails would go in clear (INGEST_SMTP_PLAIN=true sends them so)")

// Send sends m.
func (s *SMTP) Send(ctx context.Context, m Mail) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fault.Transient(fmt.Errorf("smtp %s: %w", s.Addr, err))
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(s.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return classify(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return classify(err)
		}
	} else if !s.AllowPlain {
		// Transient: a server that offered it before and not now is a
		// downgrade on the way, which may pass; one that never does is
		// configured so, and its mails park once their attempts are spent.
		return fault.Transient(fmt.Errorf("smtp %s: %w", s.Addr, ErrNoTLS))
	}
	if s.User != "" {
		if err := c.Auth(smtp.PlainAuth("", s.User, s.Password, host)); err != nil {
			return classify(err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return classify(err)
	}
	for _, to := range m.To {
		if err := c.Rcpt(to); err != nil {
			return classify(fmt.Errorf("%s: %w", to, err))
		}
	}
	w, err := c.Data()
	if err != nil {
		return classify(err)
	}
	if _, err := w.Write(Compose(s.From, m, time.Now())); err != nil {
		return classify(err)
	}
	if err := w.Close(); err != nil {
		return classify(err)
	}
	return classify(c.Quit())
}

// classify is an SMTP error under the failure model: a 5xx reply is
// permanent, anything else transient.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return fault.Permanent(fmt.Errorf("smtp: %w", err))
	}
	return fault.Transient(fmt.Errorf("smtp: %w", err))
}

// Compose is m as an RFC 5322 message from from: UTF-8 text, quoted-
// printable, its subject encoded; no header takes a line end from m.
func Compose(from string, m Mail, at time.Time) []byte {
	clean := strings.NewReplacer("\r", " ", "\n", " ")
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\n", clean.Replace(from))
	fmt.Fprintf(&b, "To: %s\r\n", clean.Replace(strings.Join(m.To, ", ")))
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", clean.Replace(m.Subject)))
	fmt.Fprintf(&b, "Date: %s\r\n", at.Format(time.RFC1123Z))
	domain := "archivist.invalid"
	if i := strings.LastIndexByte(from, '@'); i >= 0 {
		domain = clean.Replace(from[i+1:])
	}
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", clean.Replace(m.ID), domain)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(strings.ReplaceAll(m.Body, "\n", "\r\n")))
	qp.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// Log writes mails to a log instead of sending them (`archivist dev`, and
// a curator without INGEST_SMTP_ADDR).
type Log struct{ Log *slog.Logger }

// Send logs m.
func (l *Log) Send(_ context.Context, m Mail) error {
	// The body (depositors' titles, batch details) at debug only: a log
	// is read by more people than a collection's mail.
	l.Log.Info("ingest: mail (INGEST_SMTP_ADDR unset: logged, not sent)", "to", strings.Join(m.To, ", "), "subject", m.Subject)
	l.Log.Debug("ingest: mail body", "to", strings.Join(m.To, ", "), "body", m.Body)
	return nil
}

// Package smtpsink is a real SMTP server for tests (github.com/emersion/
// go-smtp) that keeps every message it is given, and refuses on demand:
// with a transient code (421, the server busy) or a permanent one (550,
// the mailbox refused).
package smtpsink

import (
	"io"
	"net"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is a message the sink was given.
type Message struct {
	From string
	To   []string
	// Header and Body are the message as parsed (net/mail).
	Header mail.Header
	Body   string
}

// Sink is a running SMTP server.
type Sink struct {
	// Addr is host:port it listens on.
	Addr string

	srv    *smtp.Server
	mu     sync.Mutex
	msgs   []Message
	refuse atomic.Int32 // 0: accept; else the code each RCPT gets
}

// Start starts a sink on a free loopback port.
func Start() (*Sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{Addr: l.Addr().String()}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{sink: s}, nil }))
	s.srv.Domain = "sink.test"
	s.srv.ReadTimeout, s.srv.WriteTimeout = 10*time.Second, 10*time.Second
	s.srv.MaxMessageBytes = 16 << 20
	go s.srv.Serve(l)
	return s, nil
}

// Close stops the sink.
func (s *Sink) Close() error { return s.srv.Close() }

// Refuse has every recipient refused with code (421: try later; 550: no
// such mailbox), or accepted again with 0.
func (s *Sink) Refuse(code int) { s.refuse.Store(int32(code)) }

// Messages are the messages given so far.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

type session struct {
	sink *Sink
	from string
	to   []string
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if code := x.sink.refuse.Load(); code != 0 {
		return &smtp.SMTPError{Code: int(code), Message: "refused by the sink"}
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return &smtp.SMTPError{Code: 554, Message: "unparsable message: " + err.Error()}
	}
	var body strings.Builder
	if _, err := io.Copy(&body, m.Body); err != nil {
		return err
	}
	x.sink.mu.Lock()
	x.sink.msgs = append(x.sink.msgs, Message{From: x.from, To: x.to, Header: m.Header, Body: body.String()})
	x.sink.mu.Unlock()
	return nil
}

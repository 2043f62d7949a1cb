package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/curator/ingest"
)

// Enqueue queues m, about batch, in tx: the transaction of the move the
// mail tells of, so that the move and its mail happen together or not at
// all.
func Enqueue(ctx context.Context, tx pgx.Tx, batch int64, kind string, m Mail) error {
	if len(m.To) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO curator.mail_outbox (batch_id, kind, recipients, subject, body, message_id) VALUES ($1, $2, $3, $4, $5, $6)`,
		batch, kind, m.To, m.Subject, m.Body, m.ID)
	if err != nil {
		return fmt.Errorf("queue the %s mail of batch %d: %w", kind, batch, err)
	}
	return nil
}

// Sender delivers the outbox: each mail due is leased, sent, and deleted;
// one that fails is tried again after the policy's backoff, and parked
// (kept, with its reason) once the policy gives up on it or the server
// refuses it for good.
type Sender struct {
	DB     *pgxpool.Pool
	Mailer Mailer
	Log    *slog.Logger
	Policy fault.Policy
}

// lease is how long a mail in hand is kept from other senders.
const lease = 5 * time.Minute

// Pass sends the mails due, at most 16, and returns how many were sent.
func (s *Sender) Pass(ctx context.Context) (int, error) {
	rows, err := s.DB.Query(ctx, `UPDATE curator.mail_outbox SET next_attempt_at = now() + $1::interval, attempts = attempts + 1
		WHERE id IN (SELECT id FROM curator.mail_outbox WHERE parked_at IS NULL AND next_attempt_at <= now() ORDER BY id LIMIT 16 FOR UPDATE SKIP LOCKED)
		RETURNING id, batch_id, kind, recipients, subject, body, message_id, attempts, first_failed_at`, lease)
	if err != nil {
		return 0, fmt.Errorf("mail outbox: %w", err)
	}
	type due struct {
		id, batch   int64
		kind        string
		mail        Mail
		attempts    int
		firstFailed *time.Time
	}
	var list []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.id, &d.batch, &d.kind, &d.mail.To, &d.mail.Subject, &d.mail.Body, &d.mail.ID, &d.attempts, &d.firstFailed); err != nil {
			rows.Close()
			return 0, err
		}
		list = append(list, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	sent := 0
	for _, d := range list {
		log := s.Log.With("batch", d.batch, "mail", d.kind, "attempt", d.attempts)
		err := s.Mailer.Send(ctx, d.mail)
		if err == nil {
			if _, err := s.DB.Exec(ctx, `DELETE FROM curator.mail_outbox WHERE id = $1`, d.id); err != nil {
				return sent, fmt.Errorf("mail %d sent: %w", d.id, err)
			}
			log.InfoContext(ctx, "ingest: mail sent", "to", len(d.mail.To))
			sent++
			continue
		}
		cause := err
		var dec fault.Decision
		err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
			var err error
			dec, err = mailFailures.Fail(ctx, tx, d.id, s.Policy, cause)
			return err
		})
		if err != nil {
			return sent, fmt.Errorf("mail %d failed: %w", d.id, err)
		}
		if dec.Park {
			log.ErrorContext(ctx, "ingest: mail not sent; parked", "err", cause)
		} else {
			log.WarnContext(ctx, "ingest: mail not sent; tried again later", "err", cause, "at", dec.RetryAt)
		}
	}
	return sent, nil
}

// mailFailures are the outbox's failure-model columns; a mail's attempt is
// counted when the sender takes it.
var mailFailures = work.Failures{Table: "curator.mail_outbox", Key: "id", Count: "attempts", Counted: true,
	FirstFailedAt: "first_failed_at", NextAt: "next_attempt_at", Error: "last_error", ParkedAt: "parked_at",
	Text: func(s string) string { return ingest.ScrubText(s, 2000) }}

// Parked is a mail the sender gave up on.
type Parked struct {
	ID        int64     `json:"id"`
	Batch     int64     `json:"batch"`
	Kind      string    `json:"kind"`
	To        []string  `json:"to"`
	Subject   string    `json:"subject"`
	Attempts  int       `json:"attempts"`
	Error     string    `json:"error"`
	ParkedAt  time.Time `json:"parked_at"`
	CreatedAt time.Time `json:"created_at"`
}

// ParkedMails lists the parked mails, the newest first (at most limit).
func ParkedMails(ctx context.Context, db *pgxpool.Pool, limit int) ([]Parked, error) {
	rows, err := db.Query(ctx, `SELECT id, batch_id, kind, recipients, subject, attempts, last_error, parked_at, created_at
		FROM curator.mail_outbox WHERE parked_at IS NOT NULL ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("parked mails: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Parked])
}

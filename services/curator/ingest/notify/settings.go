// Package notify tells depositors about their batches, as each
// collection's (profile's) settings say: a confirmation mail when a batch
// is queued, its report by mail when it ends, and the callback URL told
// when the batch names none. Mails are queued in the transaction of the
// move that causes them (an outbox) and delivered by a Sender, with the
// failure model's backoff: an SMTP server down delays a mail, never loses
// or duplicates a move.
package notify

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
)

// Settings are a collection's notification settings.
type Settings struct {
	Profile string `json:"profile"`
	// Emails are the addresses mails go to (none: no mail).
	Emails []string `json:"emails"`
	// CallbackURL is told of each job's end and sent each report, for a
	// batch that names no callback of its own.
	CallbackURL string `json:"callback_url,omitempty"`
	// Confirm sends a mail when a batch is queued; Report one with the
	// batch's report when it ends.
	Confirm bool `json:"confirm"`
	Report  bool `json:"report"`
}

// Defaults are a collection's settings until an operator sets them: no
// address, so no mail.
func Defaults(profile string) Settings {
	return Settings{Profile: profile, Emails: []string{}, Confirm: true, Report: true}
}

// Validate checks the settings: at most 20 plain addresses, an http(s)
// callback.
func (s *Settings) Validate() error {
	if err := ingest.CheckName("profile", s.Profile); err != nil {
		return err
	}
	if len(s.Emails) > 20 {
		return &ingest.InvalidError{Field: "emails", Msg: "at most 20"}
	}
	for i, e := range s.Emails {
		a, err := mail.ParseAddress(e)
		if err != nil || a.Name != "" || a.Address != e {
			return &ingest.InvalidError{Field: "emails", Msg: fmt.Sprintf("%.80q is not a plain address (name@example.org)", e)}
		}
		s.Emails[i] = a.Address
	}
	if s.Emails == nil {
		s.Emails = []string{}
	}
	if s.CallbackURL != "" {
		if err := manifest.CheckURL(s.CallbackURL); err != nil {
			return &ingest.InvalidError{Field: "callback_url", Msg: err.Error()}
		}
	}
	return nil
}

// Store keeps the settings (curator.profiles).
type Store struct{ DB *pgxpool.Pool }

// Get reads a collection's settings (its defaults if it has none).
func (s *Store) Get(ctx context.Context, profile string) (Settings, error) {
	st := Defaults(profile)
	err := s.DB.QueryRow(ctx, `SELECT emails, callback_url, confirm, report FROM curator.profiles WHERE profile = $1`, profile).
		Scan(&st.Emails, &st.CallbackURL, &st.Confirm, &st.Report)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("settings of %s: %w", profile, err)
	}
	return st, nil
}

// Put sets a collection's settings.
func (s *Store) Put(ctx context.Context, st Settings) error {
	if err := st.Validate(); err != nil {
		return err
	}
	_, err := s.DB.Exec(ctx, `INSERT INTO curator.profiles (profile, emails, callback_url, confirm, report) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (profile) DO UPDATE SET emails = $2, callback_url = $3, confirm = $4, report = $5, updated_at = now()`,
		st.Profile, st.Emails, st.CallbackURL, st.Confirm, st.Report)
	if err != nil {
		return fmt.Errorf("settings of %s: %w", st.Profile, err)
	}
	return nil
}

// List reads every collection's settings that were set.
func (s *Store) List(ctx context.Context) ([]Settings, error) {
	rows, err := s.DB.Query(ctx, `SELECT profile, emails, callback_url, confirm, report FROM curator.profiles ORDER BY profile LIMIT 10000`)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Settings])
}

// Callbacks are a deposit's callbacks: the collection's (an operator's),
// and the batch's own when it names another. A depositor cannot keep the
// collection's from hearing of its batches.
func Callbacks(collection, batch string) []string {
	var out []string
	for _, cb := range []string{collection, batch} {
		if cb != "" && !slices.Contains(out, cb) {
			out = append(out, cb)
		}
	}
	return out
}

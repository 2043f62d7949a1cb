package ingest

import (
	"errors"
	"slices"
	"strings"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/ingest/ark"
	"github.com/archivist/archivist/services/curator/ingest/manifest"
	"github.com/jackc/pgx/v5"
)

// Types are the submission types: one file, a zip container, an object
// manifest (one object of many files), a batch manifest (each row a
// one-file object), a manifest of object manifests and a manifest of
// containers (each row a zip container, one object each).
var Types = []string{"file", "container", "manifest", "batch-manifest", "manifest-of-manifests", "manifest-of-containers"}

// Modes are the submission modes: how a submission of an object that
// exists makes its new version. "add" (the default) adds the submitted
// files to the previous version's (a file of the same name replaced);
// "update" makes a version of the submitted files only.
var Modes = []string{"add", "update"}

// Submission is a batch as submitted.
type Submission struct {
	// Submitter is the depositor: the key that submits it (a body that
	// names another is refused unless an operator's).
	Submitter string `json:"submitter,omitempty"`
	// Profile is the collection the batch goes into.
	Profile    string `json:"profile"`
	PayloadURL string `json:"payload_url"`
	Type       string `json:"type"`
	Title      string `json:"title,omitempty"`
	Creator    string `json:"creator,omitempty"`
	Date       string `json:"date,omitempty"`
	// CallbackURL is told of each job's end (the profile's notification).
	CallbackURL string `json:"callback_url,omitempty"`
	// Primary is the object's ARK, supplied by the depositor (for a
	// submission of one object: file, container, manifest; the rows of the
	// manifests of many carry their own, mrt:primaryIdentifier).
	Primary string `json:"primary,omitempty"`
	// SubmissionMode is add (the default) or update (see Modes).
	SubmissionMode string `json:"submission_mode,omitempty"`
	// ARKShoulders are the shoulders or NAANs (comma-separated, "*" any)
	// under which the depositor's key may supply the ARK of a new object
	// (Identity.ARKs): a supplied ARK that names no object must lie under
	// one.
	ARKShoulders string `json:"-"`
	// IdempotencyKey, from the request's Idempotency-Key header, names the
	// submission within its submitter's: a retry with the same key finds
	// the batch the first made.
	IdempotencyKey string `json:"-"`
}

// InvalidError is a submission or request that is wrong, naming the field.
type InvalidError struct{ Field, Msg string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// CheckName checks a collection (profile) name as events.ValidateSource
// checks a source's: a name with a '.', a wildcard or a space would
// escape the scope of the subjects, users and keys it is part of.
func CheckName(field, name string) error {
	var fe *events.FieldError
	if err := events.ValidateSource(field, name); errors.As(err, &fe) {
		return &InvalidError{fe.Field, fe.Msg}
	}
	return nil
}

// Validate checks a submission.
func (s *Submission) Validate() error {
	switch {
	case strings.TrimSpace(s.Submitter) == "":
		return &InvalidError{"submitter", "required"}
	case strings.TrimSpace(s.Profile) == "":
		return &InvalidError{"profile", "required"}
	case !slices.Contains(Types, s.Type):
		return &InvalidError{"type", "one of " + strings.Join(Types, ", ")}
	}
	if err := CheckName("profile", s.Profile); err != nil {
		return err
	}
	if k := s.IdempotencyKey; len(k) > 200 || strings.IndexFunc(k, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return &InvalidError{"Idempotency-Key", "at most 200 printable ASCII characters, no spaces"}
	}
	if err := manifest.CheckURL(s.PayloadURL); err != nil {
		return &InvalidError{"payload_url", err.Error()}
	}
	if s.SubmissionMode == "" {
		s.SubmissionMode = "add"
	}
	if !slices.Contains(Modes, s.SubmissionMode) {
		return &InvalidError{"submission_mode", "one of " + strings.Join(Modes, ", ")}
	}
	if s.Primary != "" {
		if !slices.Contains([]string{"file", "container", "manifest"}, s.Type) {
			return &InvalidError{"primary", "only for a submission of one object (file, container, manifest); a manifest's rows carry their own (mrt:primaryIdentifier)"}
		}
		if err := ark.Check(s.Primary); err != nil {
			return &InvalidError{"primary", err.Error()}
		}
	}
	if s.CallbackURL != "" {
		if err := manifest.CheckURL(s.CallbackURL); err != nil {
			return &InvalidError{"callback_url", err.Error()}
		}
	}
	return nil
}

// File is one file of a job.
type File struct {
	URL string `json:"url"`
	// Name is its path inside the object.
	Name string `json:"name"`
	// DigestAlg and Digest are what the manifest declared (optional).
	DigestAlg string `json:"digest_alg,omitempty"`
	Digest    string `json:"digest,omitempty"`
	// Size is declared (the manifest's, checked), then measured.
	Size int64 `json:"size,omitempty"`
	// Reported is the size a HEAD reported while estimating (0: unknown):
	// the room reserved for it; beyond it a download goes on only while
	// the working area has room.
	Reported int64 `json:"reported,omitempty"`
	// SHA256 is computed on download.
	SHA256 string `json:"sha256,omitempty"`
	// Key, when set, is where an earlier version of the object stored the
	// file: carried into this version unchanged (submission mode add), not
	// downloaded or stored again.
	Key string `json:"key,omitempty"`
}

// JobRow is a job as stored.
type JobRow struct {
	ID             int64
	BatchID        int64
	Profile        string
	Priority       int
	State          State
	LastSuccessful State
	RetryCount     int
	Error          string
	Kind           string
	PayloadURL     string
	LocalID        string
	Title          string
	Files          []File
	SpaceNeeded    int64
	ARK            string
	Version        int
	// Submitter is the batch's depositor.
	Submitter string
	// Primary is the ARK the depositor supplied ("" if none).
	Primary string
	// Mode is the submission mode (add or update).
	Mode string
}

const jobColumns = `id, batch_id, profile, priority, state, last_successful, retry_count, error, kind, payload_url, local_id, title, files, space_needed, ark, version, submitter, primary_ark, submission_mode`

// fields are the JobRow's fields in jobColumns' order, to scan into.
func (j *JobRow) fields() []any {
	return []any{&j.ID, &j.BatchID, &j.Profile, &j.Priority, &j.State, &j.LastSuccessful, &j.RetryCount, &j.Error,
		&j.Kind, &j.PayloadURL, &j.LocalID, &j.Title, &j.Files, &j.SpaceNeeded, &j.ARK, &j.Version, &j.Submitter, &j.Primary, &j.Mode}
}

func scanJob(row pgx.Row, id int64) (*JobRow, error) {
	var j JobRow
	err := row.Scan(j.fields()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Job, id}
	}
	return &j, err
}

package integrity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/groupcommit"
)

// ErrRetryLater is returned when the matching row says to try again later
// (not the last attempt): the caller puts the task back with a delay.
var ErrRetryLater = errors.New("retry later")

// Value is one of the four checksums as observed.
type Value struct {
	State State  `json:"state"`
	Value string `json:"value,omitempty"`
}

// Observation is what a check saw of one object.
type Observation struct {
	Object   string `json:"object"`
	Content  Value  `json:"content"`
	Provider Value  `json:"provider"`
	Index    Value  `json:"index"`
	Log      Value  `json:"log"`

	info       blob.Info
	sha256     string
	logHasProp bool
}

// Checker runs bit-integrity checks.
type Checker struct {
	db        *pgxpool.Pool
	store     blob.Store
	secondary blob.Store
	commits   *groupcommit.Committer[pendingCheck]
}

// New returns a checker of objects in store, recording in db. secondary, if
// not nil, is a second copy of the archive: content gone sour there is
// internally resolvable.
func New(db *pgxpool.Pool, store, secondary blob.Store) *Checker {
	c := &Checker{db: db, store: store, secondary: secondary}
	c.commits = groupcommit.New(c.writeChecks)
	return c
}

// Result is what a check did.
type Result struct {
	Observation Observation
	Row         Row
	Matched     bool
	// ProviderChecksumErr is why a checksum of the provider's own could
	// not be added to an object that had none (tried again at its next
	// check).
	ProviderChecksumErr error
}

// Check checks one object on attempt (1-based) of last, and applies the
// effects of the matching row. light compares checksums without reading the
// content. It returns ErrRetryLater when the row says to try again later.
func (c *Checker) Check(ctx context.Context, object string, light bool, attempt, last int) (Result, error) {
	obs, err := c.Observe(ctx, object, light)
	if err != nil {
		return Result{}, err
	}
	row, ok := Match(obs.Content.State, obs.Provider.State, obs.Index.State, obs.Log.State)
	if !ok && light && obs.Provider.State != Absent {
		// The cheap comparison is inconclusive: read the content.
		return c.Check(ctx, object, false, attempt, last)
	}
	res := Result{Observation: obs, Row: row, Matched: ok}
	if ok && row.Has(RetryLater) && attempt < last {
		return res, ErrRetryLater
	}
	if err := c.commits.Do(ctx, pendingCheck{res: res, attempt: attempt}); err != nil {
		return res, err
	}
	if ok && row.No == 1 && obs.Provider.State == NA && obs.sha256 != "" {
		// The check stands whatever this does: a failure is tried again
		// at the object's next check.
		res.ProviderChecksumErr = c.addProviderChecksum(ctx, obs)
	}
	return res, nil
}

// addProviderChecksum asks the store for a checksum of its own of an
// object that has none, now that a check read its content as the archive
// recorded it (row 1), and records the outcome: added (the store's new
// checksum is the content's), none (the store cannot: an S3 object beyond
// 5 GiB), or differs (the bytes changed between the read and the copy: the
// next check will say how).
func (c *Checker) addProviderChecksum(ctx context.Context, obs Observation) error {
	state, note := "added", ""
	info, err := blob.AddChecksum(ctx, c.store, obs.Object)
	switch {
	case errors.Is(err, blob.ErrNoProviderChecksum):
		state, note = "none", err.Error()
	case err != nil:
		return fmt.Errorf("add a provider checksum to %s: %w", obs.Object, err)
	case info.Checksum.Algorithm != "sha256" || info.Checksum.Value != obs.sha256:
		state, note = "differs", fmt.Sprintf("the store's new checksum %s, the content read %s", info.Checksum, obs.sha256)
	}
	_, err = c.db.Exec(ctx, `INSERT INTO auditor.provider_checksums (object, state, note) VALUES ($1, $2, $3)
		ON CONFLICT (object) DO UPDATE SET state = EXCLUDED.state, note = EXCLUDED.note, at = now()`, obs.Object, state, note)
	return err
}

// Observe reads the four checksums of object and says how each relates to
// the others.
func (c *Checker) Observe(ctx context.Context, object string, light bool) (Observation, error) {
	obs := Observation{Object: object}
	var idx, lg *string
	var logProps []byte
	err := c.db.QueryRow(ctx, `SELECT
		(SELECT checksum FROM auditor.content_index WHERE object = $1),
		(SELECT CASE WHEN action = 'delete' THEN NULL ELSE checksum END FROM auditor.audit_log WHERE object = $1 ORDER BY id DESC LIMIT 1),
		(SELECT CASE WHEN action = 'delete' THEN NULL ELSE properties END FROM auditor.audit_log WHERE object = $1 ORDER BY id DESC LIMIT 1)`,
		object).Scan(&idx, &lg, &logProps)
	if err != nil {
		return obs, fmt.Errorf("read index and audit log of %s: %w", object, err)
	}
	obs.logHasProp = len(logProps) > 0 && string(logProps) != "null"
	info, err := c.store.Stat(ctx, object)
	if errors.Is(err, blob.ErrNotFound) {
		obs.Content, obs.Provider = Value{State: Absent}, Value{State: Absent}
		obs.Index, obs.Log = presence(idx), presence(lg)
		return obs, nil
	}
	if err != nil {
		return obs, fmt.Errorf("stat %s: %w", object, err)
	}
	obs.info = info
	p := info.Checksum
	obs.Provider.Value = p.String()
	if light {
		return observeLight(obs, p, idx, lg), nil
	}
	digests, err := c.digest(ctx, object, p.Algorithm)
	if errors.Is(err, blob.ErrNotFound) { // deleted while we looked
		return c.Observe(ctx, object, light)
	}
	if err != nil {
		return obs, err
	}
	sum := digests["sha256"]
	obs.sha256 = sum
	obs.Content.Value = "sha256:" + sum
	// The provider's word: its own checksum of the bytes it was given,
	// compared with the bytes it gives now; none when it keeps no digest
	// (an ETag of a multipart or encrypted put): "not available", which
	// can never say the provider changed the object (row 10).
	provider := NA
	if p.Digests() {
		provider = stateOf(digests[p.Algorithm] == p.Value)
	}
	idxState, logState := compare(idx, sum), compare(lg, sum)
	// A stored version never changes (blob.ImmutablePrefix): bytes under
	// its key that the provider vouches for but the record does not were
	// written over it, and are the version gone sour, never an update.
	overwritten := blob.Immutable(object) && provider == OK
	// Content that went sour: the content alone disagrees with an index and
	// a log that agree with each other, and with a provider that either
	// has no word, disagrees with the content, or (speaking sha256) agrees
	// with them, or vouches for bytes written over a version.
	if (provider != OK || overwritten) && idx != nil && lg != nil && *idx == *lg && *idx != sum && (overwritten || p.Algorithm != "sha256" || p.Value == *idx) {
		switch {
		case overwritten:
			provider = NA // its word is of other bytes than the version's
		case provider == Bad:
			provider = OK // it agrees with the record, not with the bytes
		}
		obs.Content.State, obs.Provider.State, obs.Index, obs.Log = Bad, provider, Value{OK, *idx}, Value{OK, *lg}
		return obs, nil
	}
	obs.Content.State = OK
	obs.Provider.State = provider
	obs.Index, obs.Log = Value{idxState, deref(idx)}, Value{logState, deref(lg)}
	return obs, nil
}

// observeLight compares without the content: the provider's checksum
// against index and log, when the provider speaks sha256.
func observeLight(obs Observation, p blob.Checksum, idx, lg *string) Observation {
	obs.Content = Value{State: NA}
	if p.Algorithm != "sha256" {
		obs.Provider.State = "" // not comparable: no row matches, the content will be read
		return obs
	}
	switch {
	case idx != nil && lg != nil && *idx == *lg:
		obs.Provider.State = stateOf(p.Value == *idx)
		obs.Index, obs.Log = Value{OK, *idx}, Value{OK, *lg}
	case idx != nil && p.Value == *idx:
		obs.Provider.State, obs.Index, obs.Log = OK, Value{OK, *idx}, Value{compare(lg, p.Value), deref(lg)}
	case lg != nil && p.Value == *lg:
		obs.Provider.State, obs.Log, obs.Index = OK, Value{OK, *lg}, Value{compare(idx, p.Value), deref(idx)}
	}
	return obs
}

// readBuffers are the 1 MiB buffers checks read content through, shared:
// one allocated (and zeroed) for every check was most of a small object's
// check, and the garbage collector's work.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

func (c *Checker) digest(ctx context.Context, object, providerAlgo string) (map[string]string, error) {
	rc, _, err := c.store.Get(ctx, object)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	hs := map[string]hash.Hash{"sha256": sha256.New()}
	if h := blob.NewHash(providerAlgo); h != nil && providerAlgo != "sha256" {
		hs[providerAlgo] = h
	}
	ws := make([]io.Writer, 0, len(hs))
	for _, h := range hs {
		ws = append(ws, h)
	}
	buf := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(buf)
	if _, err := io.CopyBuffer(io.MultiWriter(ws...), progressReader{ctx, rc}, *buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", object, err)
	}
	out := map[string]string{}
	for a, h := range hs {
		out[a] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// progressReader reports each read as progress of the check (under the
// worker manager's stall timeout the task is kept for as long as bytes
// flow) and stops once the check's context ends (a read that stalled).
type progressReader struct {
	ctx context.Context
	r   io.Reader
}

func (p progressReader) Read(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, fmt.Errorf("read stopped: %w", err)
	}
	n, err := p.r.Read(b)
	if n > 0 {
		bus.Progress(p.ctx)
	}
	return n, err
}

func presence(v *string) Value {
	if v == nil {
		return Value{State: Missing}
	}
	return Value{State: OK, Value: *v}
}

func compare(v *string, want string) State {
	switch {
	case v == nil:
		return Missing
	case *v == want:
		return OK
	default:
		return Bad
	}
}

func stateOf(ok bool) State {
	if ok {
		return OK
	}
	return Bad
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// queuer takes statements to run later, in one round trip (a pgx.Batch).
type queuer interface {
	Queue(sql string, args ...any) *pgx.QueuedQuery
}

// apply queues the statements of the effects of the row (or, with no row,
// a failure and an external resolution task): they run in one transaction,
// with those of the checks committed beside it.
func (c *Checker) apply(ctx context.Context, q queuer, res Result, attempt int) error {
	obs, row := res.Observation, res.Row
	checks, _ := json.Marshal(obs)
	exec := func(sql string, args ...any) error {
		q.Queue(sql, args...)
		return nil
	}
	logBit := func(success, bitError bool, note string) error {
		return exec(`INSERT INTO auditor.bit_log (object, row_no, success, bit_error, attempt, checks, note)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, obs.Object, row.No, success, bitError, attempt, checks, note)
	}
	resolve := func(kind, reason string) error {
		return exec(`INSERT INTO auditor.resolution_tasks (object, kind, reason, row_no) VALUES ($1, $2, $3, $4)
			ON CONFLICT (object, kind, row_no) WHERE state = 'open' DO NOTHING`, obs.Object, kind, reason, row.No)
	}
	queueAudit := func(reason string) error {
		return exec(`INSERT INTO auditor.audit_queue (object, reason, row_no) VALUES ($1, $2, $3)
			ON CONFLICT (object) WHERE NOT done DO NOTHING`, obs.Object, reason, row.No)
	}
	if !res.Matched {
		reason := fmt.Sprintf("no row of the outcome table matches content %s, provider %s, index %s, log %s",
			obs.Content.State, obs.Provider.State, obs.Index.State, obs.Log.State)
		return errors.Join(logBit(false, false, reason), resolve("external", reason))
	}
	var errs []error
	for _, e := range row.Effects {
		switch e {
		case LogSuccess:
			errs = append(errs, logBit(true, false, row.Cause))
		case LogFailure:
			errs = append(errs, logBit(false, false, row.Cause))
		case ResolveInternal:
			errs = append(errs, resolve("internal", row.Cause))
		case ResolveExternal:
			errs = append(errs, resolve("external", row.Cause))
		case ResolveContent:
			kind := "external"
			if c.secondaryHas(ctx, obs) {
				kind = "internal"
			}
			errs = append(errs, resolve(kind, row.Cause))
		case RepairIndex:
			err := exec(`INSERT INTO auditor.content_index (object, checksum, size) VALUES ($1, $2, $3)
				ON CONFLICT (object) DO UPDATE SET checksum = EXCLUDED.checksum, size = EXCLUDED.size, updated_at = now()`,
				obs.Object, obs.sha256, obs.info.Size)
			errs = append(errs, err)
		case PatchFromProvider:
			if !obs.logHasProp {
				props, _ := json.Marshal(obs.info.Properties)
				errs = append(errs, exec(`INSERT INTO auditor.audit_log (object, action, checksum, size, properties, source)
					VALUES ($1, 'update', $2, $3, $4, 'patch')`, obs.Object, obs.sha256, obs.info.Size, props))
				errs = append(errs, exec(`UPDATE auditor.content_index SET properties = $2 WHERE object = $1`, obs.Object, props))
			}
		case QueueAudit:
			errs = append(errs, queueAudit(row.Cause))
		case RetryLater:
			// Reached only on the last attempt: the final effect follows.
		case BitError:
			errs = append(errs, logBit(false, true, "bit error: "+row.Cause))
		case LastLogErrorAndAudit:
			errs = append(errs, logBit(false, true, "error: "+row.Cause), queueAudit(row.Cause))
		}
	}
	if row.No != 11 {
		errs = append(errs, exec(`UPDATE auditor.schedule SET checked_at = now(), parked_at = NULL, parked_reason = NULL WHERE object = $1`, obs.Object))
	}
	return errors.Join(errs...)
}

// secondaryHas reports whether the secondary store holds the object with the
// digest the index and log agree on: by the store's SHA-256 where it keeps
// one, else by reading the copy (a multipart upload's CRC-64, an object
// over 5 GiB, an ETag that digests nothing: whatever the store reports,
// the bytes decide). Row 2 is rare, and a copy read is one a repair would
// read anyway.
func (c *Checker) secondaryHas(ctx context.Context, obs Observation) bool {
	if c.secondary == nil || len(obs.Index.Value) != 64 {
		return false
	}
	info, err := c.secondary.Stat(ctx, obs.Object)
	if err != nil {
		return false
	}
	if info.Checksum.Algorithm == "sha256" {
		return info.Checksum.Value == obs.Index.Value
	}
	rc, _, err := c.secondary.Get(ctx, obs.Object)
	if err != nil {
		return false
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == obs.Index.Value
}

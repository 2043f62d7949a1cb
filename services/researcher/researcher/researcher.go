// Package researcher is the researcher runtime (tbtl-work-assignment.txt):
// it announces itself while alive, takes one work item at a time, fetches the
// episode's and clips' audio from the blob store, runs a ClipLocator, and
// sends one completed-research event per clip as soon as the clip is done,
// flagging its last result final (when all clips are done, or when it stops
// mid-item).
package researcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/fault"
	"github.com/archivist/archivist/pkg/research"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/researcher/artifact"
	"github.com/archivist/archivist/services/researcher/audio"
)

// Audio is a piece of audio to analyse: its reference and a way to read it.
type Audio struct {
	// Ref names the audio and locates it in the blob store.
	Ref events.AudioRef
	// Open streams the audio.
	Open func(ctx context.Context) (io.ReadCloser, error)
	// Check, when set, tells without reading it whether the audio is
	// still there and, where the store knows its sha256, still the bytes
	// Ref declares: a locator that uses what it derived from the audio
	// earlier calls it instead of Open (its errors are Open's).
	Check func(ctx context.Context) error
	// Digest, when set, names the audio's bytes by a sha256 in hex that
	// changes whenever they do (MediaDigest), so that what a locator
	// derives from them is kept and used again whether or not Ref
	// declares a sha256. "" names nothing: the audio is analysed each
	// time. Unset, Ref's declared sha256 names them.
	Digest func(ctx context.Context) (string, error)
}

// ClipLocator finds every occurrence of each clip in an episode. It calls
// found once for each clip (by its index in clips) as soon as that clip is
// done, in any order, and stops early when ctx ends or found fails. A clip
// that cannot be researched (its audio missing, undecodable or beyond a
// bound) is reported with a non-nil failure and no occurrences, and the
// other clips are researched as usual; an episode that cannot be researched
// is Locate's error.
type ClipLocator interface {
	Locate(ctx context.Context, episode Audio, clips []Audio, found func(clip int, occ []events.Occurrence, failure error) error) error
}

// MissExplainer is a ClipLocator that also says why a clip was found
// nowhere: found is told, with a clip without occurrences or failure, its
// best refused candidates (nil where it has none to tell). The researcher
// sends them with the clip's result.
type MissExplainer interface {
	LocateExplained(ctx context.Context, episode Audio, clips []Audio, found func(clip int, occ []events.Occurrence, miss *events.Miss, failure error) error) error
}

// ArtifactKeeper is a ClipLocator that keeps what it derives from audio
// (services/researcher/artifact) so that each piece of audio is analysed
// once, not once per work item.
type ArtifactKeeper interface {
	KeepArtifacts(c *artifact.Cache, log *slog.Logger)
}

// SpeedSpanner is a ClipLocator that also finds clips played at other
// speeds, from 1 − r to 1 + r (RESEARCHER_SPEED_RANGE).
type SpeedSpanner interface {
	SpanSpeeds(r float64) error
}

// Config is the researcher's configuration.
type Config struct {
	// Research is shared with the pwa and cwa.
	Research research.Config
	// ID names this researcher (default: host name and a random suffix).
	ID string `env:"RESEARCHER_ID"`
	// CacheDir is the local directory of analysed audio (default: the
	// user's cache directory, archivist/researcher).
	CacheDir string `env:"RESEARCHER_CACHE_DIR"`
	// CacheBytes bounds it (0: nothing is kept, locally or in the blob
	// store; every work item analyses its audio again).
	CacheBytes int64 `env:"RESEARCHER_CACHE_BYTES, default=8589934592"`
	// PrintsKey, when set (at least 16 bytes, from a Secret), shares what
	// researchers derive through the blob store (derived/), each artifact
	// signed with it and checked before it is used; unset, each researcher
	// keeps its own locally and its blob identity only reads.
	PrintsKey string `env:"RESEARCHER_PRINTS_KEY"`
	// MaxPrintBytes bounds an artifact fetched from the store.
	MaxPrintBytes int64 `env:"RESEARCHER_MAX_PRINT_BYTES, default=4294967296"`
	// SpeedRange is how far from its own speed a clip is found played (a
	// tape transferred fast or slow, a broadcast chain's drift): 0.02
	// finds clips from 2 % slow to 2 % fast, 0.1 from 10 % (every clip is
	// indexed at a speed every 2 %: more to compare each episode with,
	// docs/PERFORMANCE.md has the cost). Tempo changes with the pitch
	// kept are found to 10 % whatever it is.
	SpeedRange float64 `env:"RESEARCHER_SPEED_RANGE, default=0.02"`
}

// artifacts opens the artifact cache cfg asks for (nil: none).
func (cfg Config) artifacts(store blob.Store, log *slog.Logger) (*artifact.Cache, error) {
	if cfg.CacheBytes <= 0 {
		return nil, nil
	}
	var key []byte
	if cfg.PrintsKey == "" {
		store = nil // prints local: nothing written to, or trusted from, the bucket
	} else {
		key = []byte(cfg.PrintsKey)
	}
	if cfg.CacheDir != "" {
		c, err := artifact.New(artifact.Options{Dir: cfg.CacheDir, MaxBytes: cfg.CacheBytes, Store: store, Key: key, MaxFetchBytes: cfg.MaxPrintBytes, Log: log})
		if err != nil {
			return nil, fmt.Errorf("RESEARCHER_CACHE_DIR: %w", err)
		}
		return c, nil
	}
	// The default: the user's cache directory, else (a container's user
	// may have no home) the temporary directory.
	var err error
	for _, base := range []func() (string, error){os.UserCacheDir, func() (string, error) { return os.TempDir(), nil }} {
		dir, derr := base()
		if derr != nil {
			err = derr
			continue
		}
		var c *artifact.Cache
		if c, err = artifact.New(artifact.Options{Dir: filepath.Join(dir, "archivist", "researcher"), MaxBytes: cfg.CacheBytes, Store: store, Key: key, MaxFetchBytes: cfg.MaxPrintBytes, Log: log}); err == nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no directory for analysed audio (set RESEARCHER_CACHE_DIR): %w", err)
}

// Definition is the researcher service with loc as its engine. With a nil
// loc (no engine built in) it starts, reports ready and takes no work: it
// does not announce itself, so the pwa does not count it.
func Definition(loc ClipLocator) service.Definition {
	return service.Definition{
		Name:      "researcher",
		Summary:   "locates each leased clip's occurrences inside the episode's audio",
		NeedsBus:  loc != nil,
		NeedsBlob: loc != nil,
		Buckets:   research.Buckets,
		Config:    new(Config),
		Run: func(ctx context.Context, env *service.Env) error {
			if loc == nil {
				env.Log.WarnContext(ctx, "no clip locator is built into this researcher (the clip-locator issue); it takes no work")
				env.Ready()
				<-ctx.Done()
				return nil
			}
			var cfg Config
			if err := env.LoadConfig(ctx, &cfg); err != nil {
				return err
			}
			if sp, ok := loc.(SpeedSpanner); ok {
				if err := sp.SpanSpeeds(cfg.SpeedRange); err != nil {
					return fmt.Errorf("RESEARCHER_SPEED_RANGE: %w", err)
				}
			}
			var kept *artifact.Cache
			if k, ok := loc.(ArtifactKeeper); ok {
				c, err := cfg.artifacts(env.Blob, env.Log)
				if err != nil {
					return err
				}
				kept = c
				if c != nil {
					k.KeepArtifacts(c, env.Log)
					st := c.Stats()
					env.Log.InfoContext(ctx, "analysed audio is kept", "dir", c.Dir(), "max_bytes", cfg.CacheBytes, "files", st.Files, "bytes", st.Bytes)
				}
			}
			r, err := New(ctx, env.Bus, env.Blob, loc, cfg, env.Log)
			if err != nil {
				return err
			}
			r.artifacts = kept
			env.Ready()
			err = r.Run(ctx)
			if r.artifacts != nil {
				// What was analysed goes to the store before the process ends.
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
				defer cancel()
				if werr := r.artifacts.Wait(wctx); werr != nil {
					env.Log.WarnContext(ctx, "analysed audio not all uploaded at shutdown", "err", werr)
				}
			}
			return err
		},
	}
}

// Researcher takes work items and researches them.
type Researcher struct {
	bus  *bus.Bus
	blob blob.Store
	loc  ClipLocator
	cfg  Config
	kv   jetstream.KeyValue
	log  *slog.Logger
	stop chan struct{}
	busy atomic.Bool
	// lease is the lease of the item in hand (a heldLease), announced
	// with it: the pwa extends it while this researcher lives and works on
	// it, up to the handler's timeout (a hung handler's lease then ends).
	lease atomic.Value
	// verified remembers media whose sha256 was checked.
	verified verifiedMedia
	// artifacts keeps the locator's analysed audio (nil: none).
	artifacts *artifact.Cache
}

var badKeyChars = regexp.MustCompile(`[^-_=.a-zA-Z0-9]`)

// New prepares a researcher.
func New(ctx context.Context, b *bus.Bus, bs blob.Store, loc ClipLocator, cfg Config, log *slog.Logger) (*Researcher, error) {
	if err := cfg.Research.Check(); err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		cfg.ID = host + "-" + hex.EncodeToString(suffix)
	}
	cfg.ID = badKeyChars.ReplaceAllString(cfg.ID, "_")
	kv, err := research.Researchers(ctx, b, cfg.Research)
	if err != nil {
		return nil, err
	}
	return &Researcher{bus: b, blob: bs, loc: loc, cfg: cfg, kv: kv, log: log.With("researcher", cfg.ID), stop: make(chan struct{})}, nil
}

// ID is the researcher's name.
func (r *Researcher) ID() string { return r.cfg.ID }

// Run announces the researcher and takes work items one at a time until ctx
// ends; then it stops the item in hand (flagging its last result final) and
// withdraws its announcement.
func (r *Researcher) Run(ctx context.Context) error {
	if err := r.announce(ctx); err != nil {
		return err
	}
	sub, err := bus.Consume(ctx, r.bus, events.Researchers, r.Item, bus.WithOneAtATime())
	if err != nil {
		return err
	}
	if r.artifacts != nil {
		retired, err := bus.Consume(ctx, r.bus, events.ResearchersRetired, r.Retired)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = retired.Stop(sctx)
		}()
	}
	r.log.InfoContext(ctx, "researching")
	every := r.cfg.Research.LivenessTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := r.announce(ctx); err != nil {
				r.log.WarnContext(ctx, "announce", "err", err)
			}
			continue
		case <-ctx.Done():
		}
		break
	}
	close(r.stop)
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = sub.Stop(sctx)
	if derr := r.kv.Delete(sctx, r.cfg.ID); derr != nil {
		err = errors.Join(err, fmt.Errorf("withdraw announcement: %w", derr))
	}
	r.log.InfoContext(ctx, "stopped researching")
	return err
}

func (r *Researcher) announce(ctx context.Context) error {
	held, _ := r.lease.Load().(heldLease)
	lease := held.id
	if time.Since(held.since) > bus.DefaultHandlerTimeout {
		lease = "" // hung past its bound: the lease is let go
	}
	b, _ := json.Marshal(research.Announcement{ID: r.cfg.ID, SeenAt: time.Now().UTC(), Busy: r.busy.Load(), Lease: lease})
	if _, err := r.kv.Put(ctx, r.cfg.ID, b); err != nil {
		return fmt.Errorf("announce %s: %w", r.cfg.ID, err)
	}
	return nil
}

// setBusy records whether an item is in hand (and its lease) and announces
// it at once.
func (r *Researcher) setBusy(ctx context.Context, busy bool, lease string) {
	r.busy.Store(busy)
	r.lease.Store(heldLease{id: lease, since: time.Now()})
	if err := r.announce(ctx); err != nil {
		r.log.WarnContext(ctx, "announce", "err", err)
	}
}

// Retired discards what was derived from audio no work names any more:
// in the blob store, and in this researcher's directory (other
// researchers' directories drop theirs as they evict).
func (r *Researcher) Retired(ctx context.Context, m *bus.Message[events.MediaRetired]) error {
	if err := r.artifacts.DiscardAll(ctx, artifact.MediaPrefix(m.Event.SHA256)); err != nil {
		return fmt.Errorf("discard the prints of %s: %w", m.Event.SHA256, err)
	}
	r.log.InfoContext(ctx, "prints of retired media discarded", "sha256", m.Event.SHA256, "work", m.Event.Work, "reason", m.Event.Reason)
	return nil
}

// heldLease is the lease of the item in hand, and since when.
type heldLease struct {
	id    string
	since time.Time
}

// Item researches one work item.
func (r *Researcher) Item(ctx context.Context, m *bus.Message[events.WorkItem]) error {
	item := m.Event
	log := r.log.With("lease", item.LeaseID, "episode", item.Episode.Key)
	if now := time.Now(); now.After(item.ItemExpiresAt) && now.After(item.LeaseExpiresAt) &&
		m.Metadata.NumDelivered == 1 && !bus.IsReplay(m.Header) {
		// It waited in the queue past its own and its lease's end: the
		// lease is over, its clips leased again. An item redelivered
		// (after a pause, or a crash) or replayed by an operator is
		// researched: results of an ended lease are stored all the same.
		log.InfoContext(ctx, "work item expired before it was started; dropped", "item_expires_at", item.ItemExpiresAt)
		return nil
	}
	// Busy while the item is in hand: the pwa counts the items researchers
	// hold apart from those waiting for redelivery, and extends the lease.
	r.setBusy(ctx, true, item.LeaseID)
	defer r.setBusy(context.WithoutCancel(ctx), false, "")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-wctx.Done():
		}
	}()
	clips := make([]Audio, len(item.Clips))
	for i, c := range item.Clips {
		clips[i] = r.audio(c)
	}
	out := &sender{r: r, item: item}
	done := 0
	err := r.locate(wctx, r.audio(item.Episode), clips, func(i int, occ []events.Occurrence, miss *events.Miss, failure error) error {
		if i < 0 || i >= len(item.Clips) {
			return fmt.Errorf("locator reported clip %d of %d", i, len(item.Clips))
		}
		if failure != nil && fault.IsOutage(failure) {
			// Not the clip's fault: the item stops, and is researched
			// again when the dependency is back.
			return failure
		}
		done++
		res := &events.ResearchCompleted{LeaseID: item.LeaseID, Episode: item.Episode.Key,
			Clip: item.Clips[i].Key, Occurrences: occ, Researcher: r.cfg.ID}
		if len(occ) == 0 && failure == nil && miss != nil {
			// An explanation the event cannot carry is left out: the
			// result itself goes out.
			res.Miss = miss
			if err := res.Validate(); err != nil {
				log.WarnContext(ctx, "the miss explained cannot be sent; the result goes without it", "clip", item.Clips[i].Key, "err", err)
				res.Miss = nil
			}
		}
		if failure != nil {
			res.Occurrences, res.Failure, res.FailureKind = nil, events.FailureText(failure.Error()), FailureKind(failure)
			log.WarnContext(ctx, "clip cannot be researched", "clip", item.Clips[i].Key, "reason", res.Failure, "kind", res.FailureKind)
		}
		return out.push(wctx, res)
	})
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer fcancel()
	switch {
	case err != nil && IsClipFault(err) && !fault.IsOutage(err) && wctx.Err() == nil:
		// The episode's own audio is at fault (a clip's fault is reported
		// through found): a final result ends the lease at once, and
		// parks the episode, or (its media not in the store yet) has it
		// wait and be leased again.
		reason := events.FailureText(err.Error())
		if perr := out.push(fctx, &events.ResearchCompleted{LeaseID: item.LeaseID, Episode: item.Episode.Key,
			Clip: item.Clips[0].Key, EpisodeFailure: reason, FailureKind: FailureKind(err), Researcher: r.cfg.ID}); perr != nil {
			return perr
		}
		if ferr := out.flushFinal(fctx); ferr != nil {
			return ferr
		}
		log.WarnContext(ctx, "episode cannot be researched", "reason", reason, "kind", FailureKind(err))
	case err == nil && done == len(item.Clips):
		if ferr := out.flushFinal(fctx); ferr != nil {
			return ferr
		}
		log.InfoContext(ctx, "work item researched", "clips", done)
	case out.held != nil:
		// Stopped mid-item: the last result goes out flagged final, so the
		// cwa revokes the lease and the unfinished clips are leased again.
		if ferr := out.flushFinal(fctx); ferr != nil {
			return errors.Join(err, ferr)
		}
		log.WarnContext(ctx, "work item stopped part-way; last result flagged final", "clips_done", done, "clips", len(item.Clips), "err", err)
		if fault.IsOutage(err) {
			return err // the consumer pauses until the dependency is back
		}
	case err == nil:
		err = fmt.Errorf("locator returned %d results for %d clips", done, len(item.Clips))
		fallthrough
	default:
		// Nothing was sent: give the item back for another researcher, its
		// lease still running.
		return fmt.Errorf("work item %s not researched: %w", item.LeaseID, err)
	}
	if err := r.bus.Conn().Publish(events.SubjectPWAWake, nil); err != nil {
		log.WarnContext(ctx, "wake the pwa", "err", err)
	}
	return nil
}

// locate runs the locator, asking it why each clip was found nowhere
// where it can say (MissExplainer).
func (r *Researcher) locate(ctx context.Context, episode Audio, clips []Audio, found func(clip int, occ []events.Occurrence, miss *events.Miss, failure error) error) error {
	if x, ok := r.loc.(MissExplainer); ok {
		return x.LocateExplained(ctx, episode, clips, found)
	}
	return r.loc.Locate(ctx, episode, clips, func(clip int, occ []events.Occurrence, failure error) error {
		return found(clip, occ, nil, failure)
	})
}

func (r *Researcher) audio(ref events.AudioRef) Audio {
	return Audio{Ref: ref, Open: func(ctx context.Context) (io.ReadCloser, error) { return r.openMedia(ctx, ref) },
		Check:  func(ctx context.Context) error { return r.checkMedia(ctx, ref) },
		Digest: func(ctx context.Context) (string, error) { return MediaDigest(ctx, r.blob, ref) }}
}

// IsClipFault reports whether err is a fault of the audio itself rather
// than of the researcher: its object does not exist (yet) or is not the
// one the catalog's sha256 names, or it breaks a bound, is of no known
// format or is corrupt.
func IsClipFault(err error) bool {
	var mm *MediaMismatchError
	return errors.Is(err, blob.ErrNotFound) || errors.As(err, &mm) || audio.IsPermanent(err)
}

// FailureKind says whether a fault of the audio may pass: media not in the
// store (yet) is events.FailureMediaMissing (a curating system may describe
// audio before it is delivered); a fault of the bytes themselves is
// permanent (""); anything else events.FailureTransient.
func FailureKind(err error) string {
	var mm *MediaMismatchError
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return events.FailureMediaMissing
	case errors.As(err, &mm), audio.IsPermanent(err), fault.IsPermanent(err):
		return ""
	}
	return events.FailureTransient
}

// sender holds back the latest result so that the last one sent can be
// flagged final.
type sender struct {
	r    *Researcher
	item *events.WorkItem
	held *events.ResearchCompleted
	sent int
}

func (s *sender) push(ctx context.Context, res *events.ResearchCompleted) error {
	if s.held != nil {
		if err := s.send(ctx, s.held); err != nil {
			return err
		}
	}
	s.held = res
	return nil
}

func (s *sender) flushFinal(ctx context.Context) error {
	if s.held == nil {
		return nil
	}
	s.held.Final = true
	s.held.Sent = s.sent + 1
	err := s.send(ctx, s.held)
	s.held = nil
	return err
}

func (s *sender) send(ctx context.Context, res *events.ResearchCompleted) error {
	env, err := events.New(s.r.bus.Producer(), res)
	if err != nil {
		return err
	}
	env.ID = fmt.Sprintf("result:%s:%s", res.LeaseID, res.Clip)
	if res.Final {
		env.ID += ":final"
	}
	if _, err := s.r.bus.Publish(ctx, events.SubjectResearchCompleted, env); err != nil {
		return fmt.Errorf("send result for %s: %w", res.Clip, err)
	}
	s.sent++
	return nil
}

package events

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Event types of research work assignment (tbtl-work-assignment.txt).
const (
	TypeWorkItem          = "research.work.item"
	TypeResearchCompleted = "research.completed"
)

// Subjects and stores of research.
const (
	// SubjectWorkItem carries work items from the pwa to researchers.
	SubjectWorkItem = "research.work.item"
	// SubjectResearchCompleted carries results from researchers to the cwa.
	SubjectResearchCompleted = "research.completed"
	// SubjectPWAWake is a core NATS subject (no stream): a hint to the pwa
	// that capacity may have changed (a lease revoked, a researcher arrived).
	SubjectPWAWake = "research.pwa.wake"

	// SubjectMediaRetired carries MediaRetired from the pwa to researchers.
	SubjectMediaRetired = "research.media.retired"
	// StreamResearchRetired holds retired media until a researcher has
	// forgotten what it derived from them.
	StreamResearchRetired = "RESEARCH_RETIRED"
	// StreamResearchWork is the pending-work queue.
	StreamResearchWork = "RESEARCH_WORK"
	// StreamResearchResults is the completed-research queue.
	StreamResearchResults = "RESEARCH_RESULTS"
	// MetricOpenResearch is the pwa's gauge of episodes waiting for research
	// or being researched: what the researchers' KEDA scaler reads.
	MetricOpenResearch = "archivist_research_open_episodes"
	// BucketResearchers is the key-value bucket where each live researcher
	// keeps a key; its TTL makes a dead researcher's key disappear.
	BucketResearchers = "research_researchers"
)

// AudioRef is a piece of audio to research: a merged work's key and its
// media in the blob store.
type AudioRef struct {
	// Key is the merged work's key ("source:id").
	Key string `msgpack:"key" json:"key"`
	// Media is where its audio lives.
	Media Media `msgpack:"media" json:"media"`
	// DurationMS is its length in milliseconds, 0 if unknown.
	DurationMS int64 `msgpack:"duration_ms" json:"duration_ms"`
}

// WorkItem is a leased piece of research: an episode and the clips to
// locate in it.
type WorkItem struct {
	// LeaseID names the lease; results carry it back.
	LeaseID string `msgpack:"lease_id" json:"lease_id"`
	// Episode is the episode to search.
	Episode AudioRef `msgpack:"episode" json:"episode"`
	// Clips are the clips to locate in it.
	Clips []AudioRef `msgpack:"clips" json:"clips"`
	// LeaseExpiresAt is when the lease ends unless results extend it.
	LeaseExpiresAt time.Time `msgpack:"lease_expires_at" json:"lease_expires_at"`
	// ItemExpiresAt is when the queue drops the item (its TTL). JetStream
	// removes an expired item even while a researcher holds it and still
	// accepts the ack, so a researcher checks this itself.
	ItemExpiresAt time.Time `msgpack:"item_expires_at" json:"item_expires_at"`
}

// EventType implements Event.
func (WorkItem) EventType() string { return TypeWorkItem }

// EventSchemaVersion implements Event.
func (WorkItem) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (w *WorkItem) Validate() error {
	switch {
	case w.LeaseID == "":
		return &FieldError{Field: "lease_id", Msg: "is required"}
	case w.Episode.Key == "":
		return &FieldError{Field: "episode.key", Msg: "is required"}
	case len(w.Clips) == 0:
		return &FieldError{Field: "clips", Msg: "is empty"}
	case w.LeaseExpiresAt.IsZero():
		return &FieldError{Field: "lease_expires_at", Msg: "is required"}
	case w.ItemExpiresAt.IsZero():
		return &FieldError{Field: "item_expires_at", Msg: "is required"}
	}
	for i, c := range w.Clips {
		if c.Key == "" {
			return &FieldError{Field: fmt.Sprintf("clips[%d].key", i), Msg: "is required"}
		}
	}
	return nil
}

// Occurrence is one place a clip was found in an episode.
type Occurrence struct {
	// OffsetMS is where the clip starts in the episode, in milliseconds.
	OffsetMS int64 `msgpack:"offset_ms" json:"offset_ms"`
	// DurationMS is how long the occurrence lasts.
	DurationMS int64 `msgpack:"duration_ms" json:"duration_ms"`
	// Confidence is between 0 and 1.
	Confidence float64 `msgpack:"confidence" json:"confidence"`
	// Speed is the playback speed the clip was found at, as the locator
	// estimates it (1: as it is; 1.02: played 2 % fast); absent (0) where
	// the locator does not say.
	Speed float64 `msgpack:"speed,omitempty" json:"speed,omitempty"`
	// Tempo is the tempo the clip was found at with its pitch kept (a
	// broadcaster's time compression: 0.95 plays 5 % slower), as the
	// locator estimates it; absent (0) where it does not say. Offset and
	// duration are in the episode's time, as it played.
	Tempo float64 `msgpack:"tempo,omitempty" json:"tempo,omitempty"`
}

// ResearchCompleted is a researcher's result for one clip of a work item.
type ResearchCompleted struct {
	// LeaseID is the lease of the work item.
	LeaseID string `msgpack:"lease_id" json:"lease_id"`
	// Episode and Clip are the merged works' keys.
	Episode string `msgpack:"episode" json:"episode"`
	// Clip is the clip's key.
	Clip string `msgpack:"clip" json:"clip"`
	// Occurrences found; empty when the clip is not in the episode.
	Occurrences []Occurrence `msgpack:"occurrences" json:"occurrences"`
	// Final is set on the last result a researcher sends for the item (all
	// clips done, or the researcher winding down).
	Final bool `msgpack:"final" json:"final"`
	// Researcher names the researcher.
	Researcher string `msgpack:"researcher" json:"researcher"`
	// Failure, when set, says why the clip could not be researched (its
	// media is missing, undecodable or beyond a bound): the pair is parked
	// with this reason instead of storing occurrences, and the item's other
	// clips are researched as usual.
	Failure string `msgpack:"failure,omitempty" json:"failure,omitempty"`
	// EpisodeFailure, on a final result, says why the episode's own audio
	// cannot be researched (missing, undecodable, beyond a bound): the
	// episode is parked with this reason and the lease revoked; Clip then
	// only names one of the item's clips, and nothing is stored for it.
	EpisodeFailure string `msgpack:"episode_failure,omitempty" json:"episode_failure,omitempty"`
	// FailureKind says whether Failure (or EpisodeFailure) may pass:
	// FailureMediaMissing (the media is not in the store yet: a curating
	// system may describe audio before it is delivered) and
	// FailureTransient are retried with backoff for a bounded time before
	// the pair (or episode) is parked; "" is permanent (undecodable, beyond
	// a bound, not the bytes its sha256 names): parked at once.
	FailureKind string `msgpack:"failure_kind,omitempty" json:"failure_kind,omitempty"`
	// Sent, on a final result, is how many results the researcher sent for
	// the item, this one included: the cwa revokes the lease once they are
	// all stored, so that a final result overtaking its siblings does not
	// free clips whose results are on their way.
	Sent int `msgpack:"sent,omitempty" json:"sent,omitempty"`
	// Miss, on a result without occurrences or failure, says why the clip
	// was found nowhere: the best candidates the locator refused (absent
	// where the locator does not explain its misses).
	Miss *Miss `msgpack:"miss,omitempty" json:"miss,omitempty"`
}

// Miss explains a clip found nowhere in an episode: its best candidates,
// each with its evidence and the stage of the locator that refused it,
// so that an operator tells "not there" from "too degraded".
type Miss struct {
	// Candidates are the best refused, most confident first (at most
	// MaxMissCandidates).
	Candidates []MissCandidate `msgpack:"candidates" json:"candidates"`
}

// MaxMissCandidates bounds the candidates a Miss carries.
const MaxMissCandidates = 8

// MissCandidate is a place the locator considered for a clip, and why it
// did not report it.
type MissCandidate struct {
	// OffsetMS is where the clip would start in the episode.
	OffsetMS int64 `msgpack:"offset_ms" json:"offset_ms"`
	// Votes are the clip's landmarks that lined up there, of Hashes;
	// Needed, how many its landmarks alone needed to be reported there.
	Votes  int `msgpack:"votes" json:"votes"`
	Needed int `msgpack:"needed" json:"needed"`
	Hashes int `msgpack:"hashes" json:"hashes"`
	// Confidence is what the evidence came to before the refusal
	// (between 0 and 1).
	Confidence float64 `msgpack:"confidence" json:"confidence"`
	// Similarity and Waveform are the correlations of the clip's band
	// envelopes and samples with the passage's (0: not compared).
	Similarity float64 `msgpack:"similarity" json:"similarity"`
	Waveform   float64 `msgpack:"waveform" json:"waveform"`
	// SNRDB is the clip's loudness over the rest of the passage, in dB,
	// as the waveform correlation estimates it (absent: not compared).
	SNRDB *float64 `msgpack:"snr_db,omitempty" json:"snr_db,omitempty"`
	// Speed is the playback speed of the clip's variant at that place.
	Speed float64 `msgpack:"speed" json:"speed"`
	// Stage is the locator's stage that refused it (votes, landmarks,
	// envelopes, unlike, confidence, samples).
	Stage string `msgpack:"stage" json:"stage"`
}

// Kinds of a research failure (ResearchCompleted.FailureKind).
const (
	// FailureMediaMissing: the audio is not in the blob store (yet).
	FailureMediaMissing = "media-missing"
	// FailureTransient: another fault that may pass.
	FailureTransient = "transient"
)

// MaxFailureBytes bounds a failure reason carried in an event.
const MaxFailureBytes = 1024

// FailureText is a failure reason as events and tables keep it: without
// NUL bytes, valid UTF-8, and at most MaxFailureBytes ("..." marking a cut
// made at a rune boundary).
func FailureText(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "")
	if len(s) > MaxFailureBytes {
		s = strings.ToValidUTF8(s[:MaxFailureBytes-3], "") + "..."
	}
	return s
}

// EventType implements Event.
func (ResearchCompleted) EventType() string { return TypeResearchCompleted }

// EventSchemaVersion implements Event.
func (ResearchCompleted) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (r *ResearchCompleted) Validate() error {
	switch {
	case r.LeaseID == "":
		return &FieldError{Field: "lease_id", Msg: "is required"}
	case r.Episode == "":
		return &FieldError{Field: "episode", Msg: "is required"}
	case r.Clip == "":
		return &FieldError{Field: "clip", Msg: "is required"}
	case r.Failure != "" && len(r.Occurrences) > 0:
		return &FieldError{Field: "failure", Msg: "a failed clip has no occurrences"}
	case len(r.Failure) > MaxFailureBytes:
		return &FieldError{Field: "failure", Msg: fmt.Sprintf("longer than %d bytes", MaxFailureBytes)}
	case len(r.EpisodeFailure) > MaxFailureBytes:
		return &FieldError{Field: "episode_failure", Msg: fmt.Sprintf("longer than %d bytes", MaxFailureBytes)}
	case r.EpisodeFailure != "" && (!r.Final || len(r.Occurrences) > 0):
		return &FieldError{Field: "episode_failure", Msg: "comes on a final result without occurrences"}
	case r.FailureKind != "" && r.FailureKind != FailureMediaMissing && r.FailureKind != FailureTransient:
		return &FieldError{Field: "failure_kind", Msg: fmt.Sprintf("is %q: want %q, %q or none", r.FailureKind, FailureMediaMissing, FailureTransient)}
	case r.FailureKind != "" && r.Failure == "" && r.EpisodeFailure == "":
		return &FieldError{Field: "failure_kind", Msg: "comes with a failure or an episode failure"}
	}
	if r.Miss != nil {
		switch {
		case len(r.Occurrences) > 0 || r.Failure != "" || r.EpisodeFailure != "":
			return &FieldError{Field: "miss", Msg: "comes on a result without occurrences or failure"}
		case len(r.Miss.Candidates) > MaxMissCandidates:
			return &FieldError{Field: "miss.candidates", Msg: fmt.Sprintf("more than %d", MaxMissCandidates)}
		}
		for i, c := range r.Miss.Candidates {
			finite := isFinite(c.Similarity) && isFinite(c.Waveform) && isFinite(c.Speed) && (c.SNRDB == nil || isFinite(*c.SNRDB))
			if c.OffsetMS < 0 || !(c.Confidence >= 0 && c.Confidence <= 1) || !finite || len(c.Stage) > 32 {
				return &FieldError{Field: fmt.Sprintf("miss.candidates[%d]", i), Msg: "offset not negative, confidence between 0 and 1, finite numbers, stage at most 32 bytes"}
			}
		}
	}
	for i, o := range r.Occurrences {
		if o.OffsetMS < 0 || o.DurationMS < 0 {
			return &FieldError{Field: fmt.Sprintf("occurrences[%d]", i), Msg: "offset and duration must not be negative"}
		}
		if o.Confidence < 0 || o.Confidence > 1 {
			return &FieldError{Field: fmt.Sprintf("occurrences[%d].confidence", i), Msg: "must be between 0 and 1"}
		}
		if !(o.Speed >= 0 && o.Speed <= 4) {
			return &FieldError{Field: fmt.Sprintf("occurrences[%d].speed", i), Msg: "must be between 0 (not said) and 4"}
		}
		if !(o.Tempo >= 0 && o.Tempo <= 4) {
			return &FieldError{Field: fmt.Sprintf("occurrences[%d].tempo", i), Msg: "must be between 0 (not said) and 4"}
		}
	}
	return nil
}

// ResearchStreams returns the research streams. The work stream allows
// per-message TTLs: work items expire before their lease.
func ResearchStreams(replicas int) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        StreamResearchWork,
			Description: "Pending research work items; each expires (message TTL) before its lease.",
			Subjects:    []string{SubjectWorkItem},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      24 * time.Hour,
			AllowMsgTTL: true,
			Duplicates:  defaultDuplicateWindow,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		},
		{
			Name:        StreamResearchRetired,
			Description: "Media no active work names any more, whose derived data (prints) researchers discard.",
			Subjects:    []string{SubjectMediaRetired},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      7 * 24 * time.Hour,
			Duplicates:  defaultDuplicateWindow,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		},
		{
			Name:        StreamResearchResults,
			Description: "Completed research, one message per clip, for the cwa.",
			Subjects:    []string{SubjectResearchCompleted},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      7 * 24 * time.Hour,
			Duplicates:  defaultDuplicateWindow,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		},
	}
}

// Research consumers.
var (
	// Researchers is the researchers' shared consumer of work items. Its ack
	// wait is short; a researcher at work keeps it extended.
	Researchers = Consumer{
		Stream: StreamResearchWork,
		Config: jetstream.ConsumerConfig{
			Durable:       "researchers",
			Description:   "researchers: one work item at a time",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       time.Minute,
			MaxDeliver:    defaultConsumerMaxDeliver,
			MaxAckPending: 1000,
		},
	}
	// ResearchersRetired is the researchers' shared consumer of retired
	// media: one of them discards what was derived from each (in the blob
	// store, and in its own directory).
	ResearchersRetired = Consumer{
		Stream: StreamResearchRetired,
		Config: jetstream.ConsumerConfig{
			Durable:       "researchers-retired",
			Description:   "researchers: discard the prints of media no work names",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       defaultConsumerAckWait,
			MaxDeliver:    defaultConsumerMaxDeliver,
			MaxAckPending: 100,
		},
	}
	// CWAResults is the cwa replicas' shared consumer of results.
	CWAResults = Consumer{
		Stream: StreamResearchResults,
		Config: jetstream.ConsumerConfig{
			Durable:       "cwa-results",
			Description:   "cwa: stores results, extends and revokes leases",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       defaultConsumerAckWait,
			MaxDeliver:    defaultConsumerMaxDeliver,
			MaxAckPending: 1000,
		},
	}
	// PWARecorded tells the pwa of stored objects: research waiting for
	// media that was not in the store yet is due when it arrives.
	PWARecorded = Consumer{Stream: StreamArchive, Config: jetstream.ConsumerConfig{
		Durable: "pwa-recorded", Description: "pwa: media arrived for research waiting for it",
		FilterSubject: SubjectObjectRecorded, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: defaultConsumerAckWait, MaxDeliver: defaultConsumerMaxDeliver, MaxAckPending: 1000,
	}}
	// PWAWorks is the pwa's consumer of merged works.
	PWAWorks = Consumer{
		Stream: StreamWorks,
		Config: jetstream.ConsumerConfig{
			Durable:       "pwa-works",
			Description:   "pwa: its copy of merged episodes and clips",
			FilterSubject: SubjectWorkUpserted + ".>",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       defaultConsumerAckWait,
			MaxDeliver:    defaultConsumerMaxDeliver,
			MaxAckPending: 1000,
		},
	}
)

// TypeMediaRetired is the event type of MediaRetired.
const TypeMediaRetired = "research.media.retired"

// MediaRetired says that no active work names a piece of audio any more
// (its work's media changed to other bytes, or the work is gone), or that
// no lease has named it for the pwa's print retention: what researchers
// derived from it (its prints) is discarded, and made again if it is
// leased again.
type MediaRetired struct {
	// SHA256 is the audio's sha256 (64 lower-case hex digits).
	SHA256 string `msgpack:"sha256" json:"sha256"`
	// Work is the work that last named it ("source:id").
	Work string `msgpack:"work" json:"work"`
	// Reason is "media-changed", "gone" or "unused".
	Reason string `msgpack:"reason" json:"reason"`
}

// Reasons of MediaRetired.
const (
	RetiredMediaChanged = "media-changed"
	RetiredGone         = "gone"
	// RetiredUnused: still named, but by no lease for PWA_PRINT_RETENTION.
	RetiredUnused = "unused"
)

// EventType implements Event.
func (MediaRetired) EventType() string { return TypeMediaRetired }

// EventSchemaVersion implements Event.
func (MediaRetired) EventSchemaVersion() int { return 1 }

// Validate implements Event.
func (m *MediaRetired) Validate() error {
	switch {
	case !sha256Hex.MatchString(m.SHA256):
		return &FieldError{Field: "sha256", Msg: "must be 64 lower-case hex digits"}
	case m.Work == "":
		return &FieldError{Field: "work", Msg: "is required"}
	case m.Reason != RetiredMediaChanged && m.Reason != RetiredGone && m.Reason != RetiredUnused:
		return &FieldError{Field: "reason", Msg: "must be media-changed, gone or unused"}
	}
	return nil
}

// isFinite tells whether x is a number JSON can carry: not NaN, not an
// infinity.
func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

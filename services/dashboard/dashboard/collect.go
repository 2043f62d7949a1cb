package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/apiclient"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/service"
)

// Snapshot is what the page shows, read at one moment: a panel per
// pipeline, each with the error of its service where it did not answer.
type Snapshot struct {
	At       time.Time
	Research Panel[Research]
	Ingest   Panel[Ingest]
	Index    Panel[Index]
	Audit    Panel[Audit]
	Curation Panel[Curation]
	Bus      Panel[Bus]
	// FreshnessGoal marks the index as late past it.
	FreshnessGoal time.Duration
}

// Panel is one pipeline's view, or why it could not be read.
type Panel[T any] struct {
	View T
	Err  string
}

// Research is the pwa's research status (GET /v1/research/status).
type Research struct {
	Episodes struct {
		Complete        int64 `json:"complete"`
		InProgress      int64 `json:"in_progress"`
		Waiting         int64 `json:"waiting"`
		Parked          int64 `json:"parked"`
		WithFailedClips int64 `json:"with_failed_clips"`
	} `json:"episodes"`
	Parked       []ParkedWork `json:"parked"`
	FailedClips  []ParkedWork `json:"failed_clips"`
	Clips        int64        `json:"clips"`
	Results      int64        `json:"results"`
	LeasesActive int64        `json:"leases_active"`
	Leases       []struct {
		ID        string    `json:"id"`
		Episode   string    `json:"episode"`
		Clips     int       `json:"clips"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"leases"`
	QueueDepth  int64 `json:"queue_depth"`
	Researchers int   `json:"researchers"`
}

// ParkedWork is a parked episode, or a clip parked in an episode.
type ParkedWork struct {
	Episode string    `json:"episode"`
	Clip    string    `json:"clip"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// StateCount is a state's count and the age of its oldest.
type StateCount struct {
	State         string
	N             int64   `json:"n"`
	OldestSeconds float64 `json:"oldest_seconds"`
}

// Listed is a batch in the ingest list.
type Listed struct {
	ID               int64     `json:"id"`
	Profile          string    `json:"profile"`
	State            string    `json:"state"`
	StateAt          time.Time `json:"state_at"`
	Attempts         int       `json:"attempts"`
	LastAttemptError string    `json:"last_attempt_error"`
	Error            string    `json:"error"`
}

// Ingest is the curator's ingest status and newest batches.
type Ingest struct {
	Batches, Jobs []StateCount
	Recent        []Listed
}

// Index is the indexer's registry and the aggregator's generations.
type Index struct {
	ByStatus        map[string]int64 `json:"by_status"`
	OldestUnindexed *time.Time       `json:"oldest_unindexed"`
	Lines           int64            `json:"lines"`
	Parked          []struct {
		Name      string `json:"name"`
		Failures  int    `json:"failures"`
		LastError string `json:"last_error"`
	} `json:"parked"`
	Generations []struct {
		Level   string    `json:"level"`
		Key     string    `json:"key"`
		Lines   int64     `json:"lines"`
		Bytes   int64     `json:"bytes"`
		Sources int64     `json:"sources"`
		BuiltAt time.Time `json:"built_at"`
	} `json:"-"`
	GenerationsErr string `json:"-"`
	Files          int64  `json:"-"`
}

// Audit is the auditor's status, parked objects and open resolution tasks.
type Audit struct {
	Objects          int64            `json:"objects"`
	CheckedThisCycle int64            `json:"checked_this_cycle"`
	Cycle            string           `json:"cycle"`
	FailuresByRow    map[string]int64 `json:"failures_by_row"`
	BitErrors        int64            `json:"bit_errors"`
	OpenResolutions  map[string]int64 `json:"open_resolution_tasks"`
	AuditQueue       int64            `json:"audit_queue"`
	Parked           int64            `json:"parked"`
	QueuedHigh       uint64           `json:"queued_high"`
	QueuedLow        uint64           `json:"queued_low"`
	ParkedObjects    []struct {
		Object   string    `json:"object"`
		ParkedAt time.Time `json:"parked_at"`
		Reason   string    `json:"reason"`
	} `json:"-"`
	Resolutions []struct {
		ID        int64     `json:"id"`
		Object    string    `json:"object"`
		Kind      string    `json:"kind"`
		Reason    string    `json:"reason"`
		Row       int       `json:"row"`
		CreatedAt time.Time `json:"created_at"`
	} `json:"-"`
}

// Curation is the curator's curation status.
type Curation struct {
	Records map[string]map[string]int64 `json:"records"`
	Works   map[string]map[string]int64 `json:"works"`
	Stale   map[string]struct {
		N       int64     `json:"n"`
		LastKey string    `json:"last_key"`
		LastAt  time.Time `json:"last_at"`
	} `json:"stale_updates"`
	// Invariant is the last pass of the check that every record is in
	// exactly one work, by kind.
	Invariant map[string]struct {
		EndedAt    time.Time `json:"ended_at"`
		Violations int       `json:"violations"`
		Unhealed   int       `json:"unhealed"`
		Sources    map[string]struct {
			Records int `json:"records"`
			Placed  int `json:"placed"`
			Refused int `json:"refused"`
		} `json:"sources"`
	} `json:"invariant"`
}

// Bus is JetStream's side: dead letters and every consumer's backlog.
type Bus struct {
	// DeadLetters are the newest letters, shown to operators only: their
	// subjects, event ids and reasons name every tenant's work (N24).
	DeadLetters []bus.DeadLetter
	// Dead counts the letters waiting, shown to every reader.
	Dead uint64
	// LettersHidden is set when the caller is no operator.
	LettersHidden bool
	Backlogs      []bus.Backlog
	// Absent are the consumers not made yet: their services never ran.
	Absent []string
}

// Snapshot reads every pipeline at once, each call bounded by
// DASHBOARD_CALL_TIMEOUT, as the caller of ctx.
func (d *Dashboard) Snapshot(ctx context.Context) *Snapshot {
	s := &Snapshot{At: time.Now(), FreshnessGoal: d.cfg.FreshnessGoal}
	var wg sync.WaitGroup
	run := func(fn func()) { wg.Add(1); go func() { defer wg.Done(); fn() }() }
	run(func() {
		s.Research.Err = errText(d.get(ctx, "pwa", d.cfg.PWAURL, "/v1/research/status", &s.Research.View))
	})
	run(func() { s.Ingest.View, s.Ingest.Err = d.ingest(ctx) })
	run(func() { s.Index.View, s.Index.Err = d.index(ctx) })
	run(func() { s.Audit.View, s.Audit.Err = d.audit(ctx) })
	run(func() {
		s.Curation.Err = errText(d.get(ctx, "curator", d.cfg.CuratorURL, "/v1/curation/status", &s.Curation.View))
	})
	run(func() { s.Bus.View, s.Bus.Err = d.busView(ctx) })
	wg.Wait()
	return s
}

// get asks an API as the caller of ctx.
func (d *Dashboard) get(ctx context.Context, api, base, path string, out any) error {
	return apiclient.DoAs(ctx, d.client, apiauth.Credential(ctx), api, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil, out)
}

func (d *Dashboard) ingest(ctx context.Context) (Ingest, string) {
	var v Ingest
	var counts struct {
		Batches map[string]StateCount `json:"batches"`
		Jobs    map[string]StateCount `json:"jobs"`
	}
	if err := d.get(ctx, "curator", d.cfg.CuratorURL, "/v1/ingest/status", &counts); err != nil {
		return v, err.Error()
	}
	v.Batches, v.Jobs = ordered(counts.Batches), ordered(counts.Jobs)
	if err := d.get(ctx, "curator", d.cfg.CuratorURL, "/v1/batches?limit=8", &v.Recent); err != nil {
		return v, err.Error()
	}
	return v, ""
}

// stateOrder is the ingest states in the order a batch or job meets them.
var stateOrder = []string{"pending", "held", "estimating", "provisioning", "downloading", "processing", "storing",
	"recording", "notify", "reporting", "update_reporting", "completed", "failed", "deleted"}

func ordered(m map[string]StateCount) []StateCount {
	out := make([]StateCount, 0, len(m))
	for st, c := range m {
		c.State = st
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b StateCount) int {
		return slices.Index(stateOrder, a.State) - slices.Index(stateOrder, b.State)
	})
	return out
}

func (d *Dashboard) index(ctx context.Context) (Index, string) {
	var v Index
	if err := d.get(ctx, "indexer", d.cfg.IndexerURL, "/v1/index/status", &v); err != nil {
		return v, err.Error()
	}
	for _, n := range v.ByStatus {
		v.Files += n
	}
	// The aggregator answers apart: an index with no CDX API yet still shows.
	v.GenerationsErr = errText(d.get(ctx, "aggregator", d.cfg.AggregatorURL, "/v1/index/generations", &v.Generations))
	return v, ""
}

func (d *Dashboard) audit(ctx context.Context) (Audit, string) {
	var v Audit
	if err := d.get(ctx, "auditor", d.cfg.AuditorURL, "/v1/audit/status", &v); err != nil {
		return v, err.Error()
	}
	if err := d.get(ctx, "auditor", d.cfg.AuditorURL, "/v1/audit/parked?limit=8", &v.ParkedObjects); err != nil {
		return v, err.Error()
	}
	if err := d.get(ctx, "auditor", d.cfg.AuditorURL, "/v1/audit/resolutions?limit=8", &v.Resolutions); err != nil {
		return v, err.Error()
	}
	return v, ""
}

// busView reads the newest dead letters and every service's backlog.
func (d *Dashboard) busView(ctx context.Context) (Bus, string) {
	var v Bus
	if d.bus == nil {
		return v, "no NATS connection"
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	var err error
	if v.DeadLetters, v.Dead, err = d.bus.LatestDeadLetters(ctx, 12); err != nil {
		return v, err.Error()
	}
	if caller, _ := apiauth.Caller(ctx); !caller.Has(apiauth.Operator) {
		v.DeadLetters, v.LettersHidden = nil, true
	}
	for _, svc := range events.Services {
		for _, c := range events.ConsumersOf(svc) {
			bl, _, err := d.bus.Backlogs(ctx, []events.Consumer{c})
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				// Its service has not started yet (or not here).
				v.Absent = append(v.Absent, c.Stream+"/"+c.Config.Durable)
				continue
			}
			if err != nil {
				return v, err.Error()
			}
			v.Backlogs = append(v.Backlogs, bl...)
		}
	}
	return v, ""
}

var errNoLetter = errors.New("no such dead letter (replayed, or never was)")

// deadLetterHistory is a dead letter as an item: where it came from, why,
// and its trace.
func (d *Dashboard) deadLetterHistory(ctx context.Context, seq uint64) (service.History, error) {
	letters, err := d.bus.DeadLetters(ctx, seq, 1)
	if err != nil {
		return service.History{}, err
	}
	if len(letters) == 0 || letters[0].Seq != seq {
		return service.History{}, errNoLetter
	}
	l := letters[0]
	return service.History{Kind: "deadletter", ID: fmt.Sprint(seq), State: "waiting for an operator (archivist work replay)",
		Facts: []service.Fact{{Name: "stream", Value: l.Stream}, {Name: "consumer", Value: l.Consumer}, {Name: "subject", Value: l.Subject},
			{Name: "event", Value: strings.TrimSpace(l.Type + " " + l.ID)}, {Name: "deliveries", Value: fmt.Sprint(l.Deliveries)},
			{Name: "size", Value: fmt.Sprintf("%d bytes", l.Size)}},
		Events:  []service.HistoryEvent{{At: l.At, What: "dead-lettered", Detail: l.Reason}},
		TraceID: l.TraceID}, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func isNotFound(err error) bool {
	var se *apiclient.StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// ago says a duration as a person reads it: 45s, 12m, 3h, 2d.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

package httpapi

import (
	"context"
	"fmt"
	"strconv"

	"github.com/archivist/archivist/pkg/apiauth"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/telemetry"
	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/views"
)

// visible is nil when the caller may read batch or job id: an operator or
// reader any, a depositor its own. Another's is "not found", as an unknown
// id: a depositor learns nothing of others' work, not even that it exists.
func visible(ctx context.Context, s *ingest.Store, e ingest.Entity, id int64) error {
	caller, _ := apiauth.Caller(ctx)
	if !caller.OwnOnly() {
		return nil
	}
	submitter, err := views.SubmitterOf(ctx, s, e, id)
	if err != nil {
		return err
	}
	if submitter != caller.Name {
		return &ingest.NotFoundError{Entity: e, ID: id}
	}
	return nil
}

// History is a batch's or job's story as an operator follows it: its
// transitions (who moved it, why), its facts, and the trace id of the
// request that submitted its batch.
func History(ctx context.Context, s *ingest.Store, e ingest.Entity, idText string) (service.History, error) {
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		return service.History{}, fmt.Errorf("%s ids are positive numbers: %w", e, ingest.ErrNotFound)
	}
	st, err := views.StatusOf(ctx, s, e, id)
	if err != nil {
		return service.History{}, err
	}
	h := service.History{Kind: string(e), ID: idText, State: string(st.State), Facts: []service.Fact{{Name: "profile", Value: st.Profile}},
		Events: make([]service.HistoryEvent, 0, len(st.History))}
	batch := id
	if j := st.Job; j != nil {
		batch = j.BatchID
		h.Facts = append(h.Facts, service.Fact{Name: "batch", Value: strconv.FormatInt(j.BatchID, 10)},
			service.Fact{Name: "kind", Value: j.Kind}, service.Fact{Name: "payload", Value: j.PayloadURL},
			service.Fact{Name: "retries", Value: strconv.Itoa(j.RetryCount)})
		if j.ARK != "" {
			h.Facts = append(h.Facts, service.Fact{Name: "object", Value: fmt.Sprintf("%s v%d", j.ARK, j.Version)})
		}
	}
	for _, state := range []ingest.State{ingest.Pending, ingest.Held, ingest.Estimating, ingest.Provisioning, ingest.Downloading, ingest.Processing, ingest.Storing, ingest.Recording, ingest.Notify, ingest.Completed, ingest.Failed, ingest.Deleted} {
		if n := st.Jobs[state]; n > 0 {
			h.Facts = append(h.Facts, service.Fact{Name: "jobs " + string(state), Value: strconv.Itoa(n)})
		}
	}
	if st.Error != "" {
		h.Facts = append(h.Facts, service.Fact{Name: "error", Value: st.Error})
	}
	for _, m := range st.History {
		detail := "by " + string(m.By)
		if m.Detail != "" {
			detail += ": " + m.Detail
		}
		what := fmt.Sprintf("%s → %s", m.From, m.To)
		if m.Action != "" {
			what += " (" + m.Action + ")"
		}
		h.Events = append(h.Events, service.HistoryEvent{At: m.At, What: what, Detail: detail})
	}
	tp, err := ingest.BatchTraceparent(ctx, s.DB, batch)
	if err != nil {
		return h, fmt.Errorf("%s %d: %w", e, id, err)
	}
	h.TraceID = telemetry.TraceIDOf(tp)
	service.SortHistory(&h)
	return h, nil
}

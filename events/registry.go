package events

import (
	"fmt"
	"sort"
)

// Kind describes one event type: its subject and how to make an empty value
// of its payload. The registry is what a gateway or a schema test walks.
type Kind struct {
	// Type is the envelope type.
	Type string
	// Subject is the NATS subject the event is published on.
	Subject string
	// New returns a pointer to a zero payload.
	New func() Event
}

var kinds = map[string]Kind{}

func register(k Kind) { kinds[k.Type] = k }

func init() {
	register(Kind{Type: TypeEpisodeUpserted, Subject: SubjectEpisodeUpserted, New: func() Event { return new(EpisodeUpserted) }})
	register(Kind{Type: TypeClipUpserted, Subject: SubjectClipUpserted, New: func() Event { return new(ClipUpserted) }})
	register(Kind{Type: TypeRejected, Subject: SubjectRejectedPrefix + ".*", New: func() Event { return new(Rejected) }})
	register(Kind{Type: TypeGraphMatched, Subject: SubjectGraphMatched, New: func() Event { return new(GraphMatched) }})
	register(Kind{Type: TypeWorkItem, Subject: SubjectWorkItem, New: func() Event { return new(WorkItem) }})
	register(Kind{Type: TypeMediaRetired, Subject: SubjectMediaRetired, New: func() Event { return new(MediaRetired) }})
	register(Kind{Type: TypeResearchCompleted, Subject: SubjectResearchCompleted, New: func() Event { return new(ResearchCompleted) }})
	register(Kind{Type: TypeObjectRecorded, Subject: SubjectObjectRecorded, New: func() Event { return new(ObjectRecorded) }})
	register(Kind{Type: TypeObjectDeleted, Subject: SubjectObjectDeleted, New: func() Event { return new(ObjectDeleted) }})
	register(Kind{Type: TypeAuditTask, Subject: SubjectAuditTaskLow, New: func() Event { return new(AuditTask) }})
	register(Kind{Type: TypeIndexTask, Subject: SubjectIndexTask, New: func() Event { return new(IndexTask) }})
	register(Kind{Type: TypeIndexCDXReady, Subject: SubjectIndexCDXReady, New: func() Event { return new(IndexCDXReady) }})
	register(Kind{Type: TypeWorkUpserted, Subject: SubjectWorkUpserted, New: func() Event { return new(WorkUpserted) }})
}

// SubjectOf is the subject e is published on by producer: its kind's, and
// for a curation event its source's (CurationSubject: the payload's source,
// or the producer when it names none).
func SubjectOf(producer string, e Event) (string, error) {
	k, ok := Lookup(e.EventType())
	if !ok {
		return "", fmt.Errorf("event type %q is not registered", e.EventType())
	}
	var source string
	switch a := e.(type) {
	case *EpisodeUpserted:
		source = a.Source
	case *ClipUpserted:
		source = a.Source
	default:
		return k.Subject, nil
	}
	if source == "" {
		source = producer
	}
	if err := ValidateSource("source", source); err != nil {
		return "", err
	}
	return CurationSubject(source, k.Type), nil
}

// Lookup returns the kind of an event type.
func Lookup(eventType string) (Kind, bool) {
	k, ok := kinds[eventType]
	return k, ok
}

// Kinds lists every registered event type, sorted by type.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

package ingest_test

import (
	"errors"
	"testing"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/archivist/archivist/services/curator/ingest/notify"
)

// TestCollectionNamesCannotEscapeTheirScope (N28): a collection (profile)
// named with a '.', a wildcard or a space is refused where it is made, a
// submission or its settings, with a 400's error naming the field.
func TestCollectionNamesCannotEscapeTheirScope(t *testing.T) {
	for _, p := range []string{"radio.news", "radio*", "radio news", "radio>"} {
		s := ingest.Submission{Submitter: "t", Profile: p, Type: "file", PayloadURL: "https://example.org/a.txt"}
		var inv *ingest.InvalidError
		if err := s.Validate(); !errors.As(err, &inv) || inv.Field != "profile" {
			t.Errorf("a submission into collection %q: %v, want a profile error", p, err)
		}
		st := notify.Defaults(p)
		if err := st.Validate(); !errors.As(err, &inv) || inv.Field != "profile" {
			t.Errorf("the settings of collection %q: %v, want a profile error", p, err)
		}
	}
	s := ingest.Submission{Submitter: "t", Profile: "radio-news", Type: "file", PayloadURL: "https://example.org/a.txt"}
	if err := s.Validate(); err != nil {
		t.Errorf("a submission into radio-news: %v", err)
	}
}

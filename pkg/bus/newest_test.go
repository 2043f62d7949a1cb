package bus_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
)

// TestPublishNewestKeepsTheNewestVersion: eight publishers send versions 1
// to 40 of one work in random order to a stream that keeps one message per
// subject; whatever the interleaving, the subject's message is version 40.
// A resend of the version held is published again; an older one is not.
func TestPublishNewestKeepsTheNewestVersion(t *testing.T) {
	ctx := context.Background()
	b := testenv.Bus(t, "bus-test")
	subject := events.WorkSubject(events.KindEpisode, "feed:newest")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out := func(v int) bus.Outgoing {
		w := &events.WorkUpserted{Kind: events.KindEpisode, Key: "feed:newest", State: events.WorkMerged, Title: fmt.Sprint(v),
			Version: base.Add(time.Duration(v) * time.Second)}
		env, err := events.NewAt("test", w.Version, w)
		if err != nil {
			t.Fatal(err)
		}
		env.ID = fmt.Sprintf("v%d", v)
		return bus.Outgoing{Subject: subject, Envelope: env}
	}
	versions := rand.Perm(40)
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < len(versions); i += 8 {
				if _, err := b.PublishNewest(ctx, events.StreamWorks, []bus.Outgoing{out(versions[i] + 1)}, false); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st, err := b.JetStream().Stream(ctx, events.StreamWorks)
	if err != nil {
		t.Fatal(err)
	}
	last := func() (uint64, time.Time) {
		m, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		env, err := events.Unmarshal(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		return m.Sequence, env.SentAt
	}
	seq, at := last()
	if want := base.Add(40 * time.Second); !at.Equal(want) {
		t.Fatalf("the subject holds %s, want version 40 (%s)", at, want)
	}
	again := out(40)
	again.Envelope.ID = "v40-resync"
	if n, err := b.PublishNewest(ctx, events.StreamWorks, []bus.Outgoing{out(39), again}, true); err != nil || n != 1 {
		t.Errorf("a resync of versions 39 and 40 published %d (%v), want 1 (40 again)", n, err)
	}
	if seq2, at2 := last(); seq2 == seq || !at2.Equal(at) {
		t.Errorf("after the resync: sequence %d (was %d), version %s; want version 40 published again", seq2, seq, at2)
	}
}

package service_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/service"
)

// TestBacklogGauges: every service exports its consumers' lag and the dead
// letters waiting, read from JetStream when Prometheus scrapes.
func TestBacklogGauges(t *testing.T) {
	ctx := context.Background()
	natsURL := testenv.NATS(t)
	def := service.Definition{Name: "cwa", NeedsBus: true, Run: func(ctx context.Context, env *service.Env) error {
		if _, err := env.Bus.EnsureConsumer(ctx, events.CWAResults); err != nil {
			return err
		}
		env.Ready()
		<-ctx.Done()
		return nil
	}}
	svc := testenv.StartServiceIn(t, def, testenv.Shared{NATSURL: natsURL}, nil)
	b := testenv.BusAt(t, natsURL, "test")
	for i := range 3 {
		if _, err := b.JetStream().Publish(ctx, events.SubjectResearchCompleted, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	dl := events.DeadLetterSubject(events.CWAResults.Stream, events.CWAResults.Config.Durable)
	if _, err := b.JetStream().Publish(ctx, dl, []byte("x")); err != nil {
		t.Fatal(err)
	}
	pending := regexp.MustCompile(`archivist_consumer_pending\{consumer="cwa-results",service="cwa",stream="RESEARCH_RESULTS"\} 3\b`)
	dead := regexp.MustCompile(`archivist_dead_letters\{service="cwa"\} 1\b`)
	var body string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		resp, err := http.Get("http://" + svc.Admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		body = string(b)
		if pending.MatchString(body) && dead.MatchString(body) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	var ours []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "archivist_consumer") || strings.HasPrefix(l, "archivist_dead") {
			ours = append(ours, l)
		}
	}
	t.Fatalf("want 3 pending for cwa-results and 1 dead letter; /metrics has %q", ours)
}

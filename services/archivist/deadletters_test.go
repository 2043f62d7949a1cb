package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/work"
	"github.com/archivist/archivist/services/curator/curator"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startCurator runs the curator service for the CLI (NATS_URL set) and
// returns a JetStream client of its NATS.
func startCurator(t *testing.T) nats.JetStreamContext {
	t.Helper()
	svc := testenv.StartService(t, curator.Definition(), map[string]string{"CURATOR_HTTP_ADDR": "127.0.0.1:0"})
	t.Setenv("NATS_URL", svc.NATSURL)
	nc, err := nats.Connect(svc.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestDeadLettersAreWork: garbage sent to the curator lands in the
// dead-letter stream; `archivist work find --pipeline bus` shows where it
// came from and why; `work replay` counts first, refuses a count that
// moved, and with the count sends it back (where, still garbage, it is
// dead-lettered again: nothing is lost), naming who replayed it; `work
// delete` discards one; other verbs are refused.
func TestDeadLettersAreWork(t *testing.T) {
	js := startCurator(t)
	for _, id := range []string{"garbage-1", "garbage-2"} {
		if _, err := js.Publish(events.CurationSubject("radio", events.TypeClipUpserted), []byte("not an event"), nats.MsgId(id)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, &out, &out)
		return out.String(), err
	}
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out, "undecodable") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("work find never showed the garbage:\n%s", out)
		}
		var err error
		if out, err = cli("work", "find", "--pipeline", "bus"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"bus/dead-letter/1", "bus/dead-letter/2", "dead", "replay,delete"} {
		if !strings.Contains(out, want) {
			t.Errorf("work find lacks %q:\n%s", want, out)
		}
	}
	// The two were dead-lettered concurrently, in either order: each
	// one's sequence by its event id.
	o, err := cli("work", "find", "--pipeline", "bus", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var page work.Page
	if err := json.Unmarshal([]byte(o), &page); err != nil {
		t.Fatal(err)
	}
	seq := map[string]string{}
	for _, it := range page.Items {
		for _, k := range it.Keys {
			if strings.HasPrefix(k, "garbage-") {
				seq[k] = it.ID
			}
		}
	}
	g1, g2 := seq["garbage-1"], seq["garbage-2"]
	if g1 == "" || g2 == "" {
		t.Fatalf("the dead letters by event id: %v\n%s", seq, o)
	}
	// One found by its event id, by its consumer and original sequence, by
	// words of the reason.
	for _, q := range []string{"garbage-1", "CURATION/curator-clips#1", "undecodable"} {
		o, err := cli("work", "find", "--pipeline", "bus", "--query", q, "--json")
		if err != nil || !strings.Contains(o, `"id": "`+g1+`"`) {
			t.Errorf("--query %q: %v\n%s", q, err, o)
		}
	}
	if o, err := cli("work", "replay", "--query", "garbage-1"); err != nil || !strings.Contains(o, "1 item") || !strings.Contains(o, "--confirm 1") {
		t.Fatalf("dry run: %v\n%s", err, o)
	}
	if _, err := cli("work", "replay", "--query", "garbage-1", "--confirm", "2"); err == nil || !strings.Contains(err.Error(), "counted 2, now 1") {
		t.Fatalf("a confirmed count that moved: %v", err)
	}
	o, err = cli("work", "replay", "--query", "garbage-1", "--confirm", "1")
	if err != nil || !strings.Contains(o, "replay moved 1 item(s)") || !strings.Contains(o, "bus/dead-letter/"+g1) {
		t.Fatalf("replay: %v\n%s", err, o)
	}
	if _, err := cli("work", "retry", "--pipeline", "bus", "--yes"); err == nil {
		t.Error("a dead letter was retried: dead letters take replay and delete only")
	}
	if o, err := cli("work", "delete", "bus/dead-letter/"+g2, "--yes"); err != nil || !strings.Contains(o, "delete moved 1 item(s)") {
		t.Fatalf("delete: %v\n%s", err, o)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		o, err := cli("work", "find", "--pipeline", "bus", "--json")
		if err != nil {
			t.Fatal(err)
		}
		// The replayed garbage is dead-lettered again (a new sequence); the
		// deleted one is gone.
		if strings.Contains(o, `"id": "3"`) && !strings.Contains(o, `"id": "`+g1+`"`) && !strings.Contains(o, `"id": "`+g2+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replayed garbage was not dead-lettered again, or the deleted one stayed:\n%s", o)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m, err := js.GetMsg(events.StreamDeadLetter, 3)
	if err != nil || !strings.HasPrefix(m.Header.Get(events.HeaderReplayedBy), "cli") {
		t.Errorf("the replayed letter does not name its actor: %v %v", err, m)
	}
}

// TestCLIPrintsNoControlCharacters: a dead letter's headers are whatever
// its publisher wrote, and `dlq list` (now `work find --pipeline bus`) printed them raw: an escape sequence
// in a reason could rename the operator's terminal, move the cursor or
// hide a line. Every control character but tab and line feed now prints
// as its \uXXXX escape, in the table and in JSON alike.
func TestCLIPrintsNoControlCharacters(t *testing.T) {
	js := startCurator(t)
	m := nats.NewMsg(events.DeadLetterSubject(events.StreamCuration, "curator-clips"))
	m.Data = []byte("x")
	m.Header.Set(events.HeaderDLQStream, events.StreamCuration)
	m.Header.Set(events.HeaderDLQConsumer, "curator-clips")
	m.Header.Set(events.HeaderDLQSubject, events.CurationSubject("radio", events.TypeClipUpserted))
	m.Header.Set(events.HeaderDLQReason, "bad\x1b]0;owned\x07 \x1b[2Kgone \u009b31m")
	if _, err := js.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"work", "find", "--pipeline", "bus"}, {"work", "find", "--pipeline", "bus", "--json"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if strings.ContainsAny(s, "\x1b\x07\u009b") || !strings.Contains(s, `\u001b]0;owned\u0007`) {
			t.Errorf("%v printed control characters raw, or lost the reason:\n%q", args, s)
		}
	}
}

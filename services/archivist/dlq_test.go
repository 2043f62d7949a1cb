package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/curator"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestDLQCommands: garbage sent to the curator lands in the dead-letter
// stream; `archivist dlq list` shows where it came from and why, and
// `archivist dlq replay` sends it back (where, still garbage, it is
// dead-lettered again: nothing is lost).
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

func TestDLQCommands(t *testing.T) {
	js := startCurator(t)
	if _, err := js.Publish(events.CurationSubject("radio", events.TypeClipUpserted), []byte("not an event"), nats.MsgId("garbage-1")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out bytes.Buffer
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "undecodable") {
		if time.Now().After(deadline) {
			t.Fatalf("dlq list never showed the garbage:\n%s", out.String())
		}
		out.Reset()
		if err := run(ctx, []string{"dlq", "list"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"CURATION/curator-clips#1", "curation.radio.clip.upserted", "garbage-1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dlq list lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(ctx, []string{"dlq", "replay", "1"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "replayed dead letter 1 on curation.radio.clip.upserted") {
		t.Errorf("replay said: %s", out.String())
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		out.Reset()
		if err := run(ctx, []string{"dlq", "list", "--json"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), `"seq": 2`) && !strings.Contains(out.String(), `"seq": 1,`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replayed garbage was not dead-lettered again:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCLIPrintsNoControlCharacters: a dead letter's headers are whatever
// its publisher wrote, and `dlq list` printed them raw: an escape sequence
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
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "list", "--json"}} {
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

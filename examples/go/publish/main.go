// Command publish publishes one curated episode to Archivist over NATS, as
// a curating system written in Go would: on its source's subject, as its
// own NATS user (replies to its own inbox prefix), over TLS with a client
// certificate where the server asks for one, with a message id JetStream
// de-duplicates on, and JetStream's acknowledgement checked. It imports
// nothing of Archivist's: the envelope is built from schemas/ alone.
//
//	publish -url tls://nats:4222 -user radio-sys -password PW -ca ca.crt \
//	        [-cert client.crt -key client.key] -source radio -episode ep-1
//
// It prints one JSON line: the event's id and where JetStream stored it;
// it exits 1 when the event was not stored.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "tls://127.0.0.1:4222", "the NATS server")
	user := flag.String("user", "", "this system's NATS user")
	password := flag.String("password", os.Getenv("NATS_PASSWORD"), "its password (default $NATS_PASSWORD)")
	ca := flag.String("ca", "", "the CA the server's certificate is checked against")
	cert := flag.String("cert", "", "this system's client certificate (mutual TLS)")
	key := flag.String("key", "", "its key")
	source := flag.String("source", "", "the source this system publishes as (its user may publish only there)")
	episode := flag.String("episode", "", "the episode's id")
	flag.Parse()
	if *user == "" || *source == "" || *episode == "" {
		return errors.New("-user, -source and -episode are needed")
	}
	opts := []nats.Option{nats.Name("example-publisher"), nats.UserInfo(*user, *password),
		// Replies, JetStream's acknowledgements among them, come to this
		// user's own inbox prefix: the only inbox it may read.
		nats.CustomInboxPrefix("_INBOX_" + *user), nats.Timeout(30 * time.Second)}
	if *ca != "" {
		opts = append(opts, nats.RootCAs(*ca))
	}
	if *cert != "" {
		opts = append(opts, nats.ClientCert(*cert, *key))
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	id, body, err := envelope(*episode, *source, *user)
	if err != nil {
		return err
	}
	msg := nats.NewMsg("curation." + *source + ".episode.upserted")
	msg.Data = body
	msg.Header.Set("Archivist-Type", "curation.episode.upserted")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The message id makes a retry after a lost acknowledgement harmless:
	// JetStream stores it once. No acknowledgement, or an error one (a
	// subject of no stream, a full stream), means not stored. When 100,000
	// of this source's events already wait for the curator, the stream
	// refuses more until it has taken some: back off and send it again.
	var ack *jetstream.PubAck
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		ack, err = js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == 10077 && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "publish: the source's events wait for the curator; sending again in", wait)
			time.Sleep(wait)
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("not stored: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"event": id, "stream": ack.Stream, "seq": ack.Sequence, "duplicate": ack.Duplicate})
}

// envelope is the msgpack envelope of schemas/README.md around an
// EpisodeUpserted payload (schemas/curation.episode.upserted.v1.json).
func envelope(episode, source, producer string) (id string, body []byte, err error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	id, err = uuidv7(now)
	if err != nil {
		return "", nil, err
	}
	at := time.Date(2026, 3, 13, 23, 0, 0, 0, time.UTC)
	env := map[string]any{
		"id":             id,
		"type":           "curation.episode.upserted",
		"schema_version": 1,
		"producer":       producer,
		"sent_at":        now,
		"payload": map[string]any{
			"id":                 episode,
			"source":             source,
			"title":              "Published from Go: " + episode,
			"media":              map[string]any{"key": "audio/" + episode + ".mp3", "sha256": ""},
			"duration_ms":        60000,
			"priority":           1,
			"initial_curated_at": at,
			"latest_curated_at":  at,
		},
	}
	body, err = msgpack.Marshal(env)
	return id, body, err
}

// uuidv7 is a version 7 UUID of time at: its id is also its time.
func uuidv7(at time.Time) (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[6:]); err != nil {
		return "", err
	}
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:]), nil
}

package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/archivist/archivist/devkit/natsserver"
	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/aggregator/aggregator"
	aggmigrations "github.com/archivist/archivist/services/aggregator/migrations"
	"github.com/archivist/archivist/services/archivist/all"
	"github.com/archivist/archivist/services/auditor/auditor"
	auditormigrations "github.com/archivist/archivist/services/auditor/migrations"
	"github.com/archivist/archivist/services/curator/curator"
	curatormigrations "github.com/archivist/archivist/services/curator/migrations"
	"github.com/archivist/archivist/services/indexer/indexer"
	indexermigrations "github.com/archivist/archivist/services/indexer/migrations"
)

// authConf is the users file the Kubernetes NATS deployment includes.
const authConf = "../../../charts/archivist-nats/files/auth.conf"

// securedNATS starts an embedded server with the deployment's users and
// permissions, every password "pw-<service>".
func securedNATS(t *testing.T) string {
	t.Helper()
	return securedNATSWith(t, authConf, false).url
}

// secured is a server of securedNATSWith: its URL, a reload that reads its
// users file again (as a SIGHUP does), and under mutual TLS the CA and a
// client certificate of it.
type secured struct {
	url               string
	reload            func() error
	ca                *testenv.CA
	certFile, keyFile string
}

// tlsEnv are a service's NATS TLS settings on s.
func (s secured) tlsEnv() map[string]string {
	if s.ca == nil {
		return nil
	}
	return map[string]string{"NATS_TLS_CA_FILE": s.ca.File, "NATS_TLS_CERT_FILE": s.certFile, "NATS_TLS_KEY_FILE": s.keyFile}
}

// securedNATSWith is securedNATS with the users file conf and, with
// mutualTLS, TLS only, every client presenting a certificate of the CA (as
// the deployment's values say: verify: true).
func securedNATSWith(t *testing.T, conf string, mutualTLS bool) secured {
	t.Helper()
	for _, svc := range events.Users() {
		t.Setenv("NATS_PASSWORD_"+strings.ToUpper(svc), "pw-"+svc)
	}
	o := natsserver.Options{Port: -1, StoreDir: t.TempDir(), ConfigFile: conf}
	var sec secured
	if mutualTLS {
		sec.ca = testenv.NewCA(t, "archivist-nats-ca")
		_, _, pair := sec.ca.Issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
		sec.certFile, sec.keyFile, _ = sec.ca.Issue("archivist-client", x509.ExtKeyUsageClientAuth)
		o.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: sec.ca.Pool}
	}
	s, err := natsserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsserver.Stop(s) })
	sec.url = s.ClientURL()
	if mutualTLS {
		sec.url = strings.Replace(sec.url, "nats://", "tls://", 1)
	}
	// The deploy identity makes the streams and buckets, as `archivist
	// migrate` does; the services' users may not.
	// The research services of the test world keep their keys 2s
	// (newWorldAt); the deploy identity makes the bucket the same way.
	t.Setenv("RESEARCH_LIVENESS_TTL", "2s")
	ctx := context.Background()
	deploy := bus.Config{URL: sec.url, User: "deploy", Password: "pw-deploy", Replicas: 1}
	if sec.ca != nil {
		deploy.TLSCAFile, deploy.TLSCertFile, deploy.TLSKeyFile = sec.ca.File, sec.certFile, sec.keyFile
	}
	if err := service.MigrateNATS(ctx, all.Services(), deploy, testenv.Logger(t)); err != nil {
		t.Fatalf("the deploy user making the streams and buckets: %v", err)
	}
	o.Port = s.Addr().(*net.TCPAddr).Port
	sec.reload = func() error { return natsserver.Reload(s, o) }
	return sec
}

func as(svc string) map[string]string {
	return map[string]string{"NATS_USER": svc, "NATS_PASSWORD": "pw-" + svc, "NATS_ENSURE_STREAMS": "false"}
}

// TestServicesWorkWithTheirOwnNATSUsers runs the curator and the research
// services, each as its own restricted NATS user from charts/archivist-nats/files/auth.conf,
// through a whole research round: the permissions are enough.
func TestServicesWorkWithTheirOwnNATSUsers(t *testing.T) {
	url := securedNATS(t)
	w := newWorldAt(t, url, as("curator"), 2, 5, textAudio)
	for k, v := range map[string]string{"RESEARCH_LEASE_DURATION": "60s", "RESEARCH_ITEM_TTL": "30s"} {
		w.vars[k] = v
	}
	testenv.StartServiceIn(t, curator.Definition(), testenv.Shared{NATSURL: url, DBURL: testenv.DBURL(t, curatormigrations.Schema)}, as("curator"))
	w.start(named("cwa"), as("cwa"))
	w.start(locator(&testLocator{}), merge(as("researcher"), map[string]string{"RESEARCHER_ID": "r0"}))
	w.start(named("pwa"), as("pwa"))
	w.waitResults(60 * time.Second)

	// The auditor, as its own user, audits an object the curator records.
	ctx := context.Background()
	if _, err := w.shared.Blob.Put(ctx, "objects/x", strings.NewReader("x"), nil); err != nil {
		t.Fatal(err)
	}
	auditorDB := testenv.DBURL(t, auditormigrations.Schema)
	testenv.StartServiceIn(t, auditor.Definition(), testenv.Shared{NATSURL: url, DBURL: auditorDB, Blob: w.shared.Blob},
		merge(as("auditor"), map[string]string{"AUDITOR_HTTP_ADDR": "127.0.0.1:0", "AUDITOR_CYCLE": "1s", "AUDITOR_SCHEDULE_TICK": "100ms",
			"AUDITOR_IDLE_BACKOFF_MIN": "50ms", "AUDITOR_IDLE_BACKOFF_MAX": "100ms"}))
	sum := sha256.Sum256([]byte("x"))
	if _, _, err := w.bus.PublishEvent(ctx, &events.ObjectRecorded{Object: "objects/x", SHA256: hex.EncodeToString(sum[:]), Size: 1}); err != nil {
		t.Fatal(err)
	}
	// The indexer, as its own user, indexes an archive file the curator
	// records, and takes the ARCHIVE stream again from a checkpoint its
	// database went back to (a restore): a message get its user may make.
	indexerDB := testenv.DBURL(t, indexermigrations.Schema)
	ixdb, err := pgx.Connect(ctx, indexerDB)
	if err != nil {
		t.Fatal(err)
	}
	defer ixdb.Close(ctx)
	if _, err := ixdb.Exec(ctx, `INSERT INTO indexer.checkpoints (consumer, stream_seq) VALUES ('indexer-recorded', 0)`); err != nil {
		t.Fatal(err)
	}
	testenv.StartServiceIn(t, indexer.Definition(), testenv.Shared{NATSURL: url, DBURL: indexerDB, Blob: w.shared.Blob},
		merge(as("indexer"), map[string]string{"INDEXER_REPOSITORY_PREFIX": "none/", "INDEXER_DISPATCH_INTERVAL": "50ms"}))
	warc := []byte("WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://x.example/\r\nWARC-Date: 2026-01-01T00:00:00Z\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx\r\n\r\n")
	if _, err := w.shared.Blob.Put(ctx, "archive/x.warc", bytes.NewReader(warc), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.bus.PublishEvent(ctx, &events.ObjectRecorded{Object: "archive/x.warc", SHA256: strings.Repeat("0", 64), Size: int64(len(warc))}); err != nil {
		t.Fatal(err)
	}
	ready, err := w.bus.JetStream().Stream(ctx, events.StreamIndexReady)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if info, err := ready.Info(ctx); err == nil && info.State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the indexer never announced the file's index")
		}
		time.Sleep(50 * time.Millisecond)
	}

	testenv.Eventually(t, 30*time.Second, "the indexer's checkpoint past the recordings", func() bool {
		var seq int64
		err := ixdb.QueryRow(ctx, `SELECT stream_seq FROM indexer.checkpoints WHERE consumer = 'indexer-recorded'`).Scan(&seq)
		return err == nil && seq > 0
	})

	// The aggregator, as its own user, records the announcement, and takes
	// the stream again from a checkpoint its database went back to (a
	// restore): a message get of INDEX_READY that its user may make.
	aggDB := testenv.DBURL(t, aggmigrations.Schema)
	agg, err := pgx.Connect(ctx, aggDB)
	if err != nil {
		t.Fatal(err)
	}
	defer agg.Close(ctx)
	if _, err := agg.Exec(ctx, `INSERT INTO aggregator.checkpoints (consumer, stream_seq) VALUES ('aggregator-ready', 0)`); err != nil {
		t.Fatal(err)
	}
	testenv.StartServiceIn(t, aggregator.Definition(), testenv.Shared{NATSURL: url, DBURL: aggDB, Blob: w.shared.Blob},
		merge(as("aggregator"), map[string]string{"AGGREGATOR_HTTP_ADDR": "127.0.0.1:0", "AGGREGATOR_MERGE_INTERVAL": "50ms"}))
	testenv.Eventually(t, 30*time.Second, "the aggregator's checkpoint past the announcement", func() bool {
		var seq int64
		var files int
		err := agg.QueryRow(ctx, `SELECT (SELECT stream_seq FROM aggregator.checkpoints WHERE consumer = 'aggregator-ready'),
			(SELECT count(*) FROM aggregator.outputs WHERE file = 'archive/x.warc')`).Scan(&seq, &files)
		return err == nil && seq == 1 && files == 1
	})

	// A scheduled task was queued, taken and checked by the auditor: its
	// bit log holds the check. (Not "the queue empty": archive/x.warc,
	// recorded with a wrong digest, is retried every cycle, and under load
	// its task is nearly always waiting.)
	db, err := pgx.Connect(ctx, auditorDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	testenv.Eventually(t, 30*time.Second, "the auditor's check of objects/x", func() bool {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM auditor.bit_log WHERE object = 'objects/x' AND success`).Scan(&n)
		return err == nil && n > 0
	})
	// And acked, as its own user: the work queue dropped a task.
	st, err := w.bus.JetStream().Stream(ctx, events.StreamAuditLow)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a task acked by the auditor", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.LastSeq > info.State.Msgs
	})
}

// TestAServiceCannotUseAnotherServicesSubjects: the curator's user may not
// publish a research result, nor the cwa's read curation events.
func TestAServiceCannotUseAnotherServicesSubjects(t *testing.T) {
	url := securedNATS(t)
	errs := make(chan error, 10)
	connect := func(svc string) *nats.Conn {
		nc, err := nats.Connect(url, nats.UserInfo(svc, "pw-"+svc), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	curatorConn := connect("curator")
	if err := curatorConn.Publish(events.SubjectResearchCompleted, []byte("forged result")); err != nil {
		t.Fatal(err)
	}
	curatorConn.Flush()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(err.Error(), "Permissions Violation") {
			t.Errorf("curator publishing a result: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the curator's user published to research.completed unchallenged")
	}
	cwaConn := connect("cwa")
	if _, err := cwaConn.SubscribeSync("curation.>"); err != nil {
		t.Fatal(err)
	}
	cwaConn.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation") {
			t.Errorf("cwa subscribing to curation: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the cwa's user subscribed to curation.> unchallenged")
	}
	if _, err := nats.Connect(url, nats.UserInfo("curator", "wrong")); err == nil {
		t.Error("a wrong password was accepted")
	}
	// And the user it was given works for its own subject.
	if err := curatorConn.Publish(events.CurationSubject("radio", events.TypeEpisodeUpserted), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := curatorConn.FlushTimeout(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Errorf("the curator publishing a curation event: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestTheResearchersUserIsConfined: the researcher, the process that decodes
// hostile audio, holds the least: it may not read another user's inbox (nor
// the shared _INBOX), get or delete messages in a stream it does not
// consume, change a stream (only the deploy user may), or dead-letter for
// another service's consumer; its own inbox and subjects work.
func TestTheResearchersUserIsConfined(t *testing.T) {
	url := securedNATS(t)
	c := connectAs(t, url, "researcher")
	nc, errs, refused := c.nc, c.errs, c.refused
	sub := func(subject string) func() error {
		return func() error { _, err := nc.SubscribeSync(subject); return err }
	}
	pub := func(subject string) func() error { return func() error { return nc.Publish(subject, []byte("{}")) } }
	refused("subscribe to the shared _INBOX", sub("_INBOX.>"))
	refused("subscribe to the curator's inbox", sub(events.InboxPrefix("curator")+".>"))
	refused("get a message of CURATION", pub("$JS.API.STREAM.MSG.GET."+events.StreamCuration))
	refused("delete a message of WORKS", pub("$JS.API.STREAM.MSG.DELETE.WORKS"))
	refused("update a stream", pub("$JS.API.STREAM.UPDATE."+events.StreamResearchWork))
	refused("create its key-value bucket", pub("$JS.API.STREAM.CREATE.KV_"+events.BucketResearchers))
	refused("update its key-value bucket", pub("$JS.API.STREAM.UPDATE.KV_"+events.BucketResearchers))
	refused("dead-letter for the curator's consumer", pub(events.DeadLetterSubject(events.StreamCuration, events.CuratorEpisodes.Config.Durable)))
	// Its own inbox and subjects are allowed.
	if _, err := nc.SubscribeSync(events.InboxPrefix("researcher") + ".x"); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(events.SubjectPWAWake, nil); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	select {
	case err := <-errs:
		t.Errorf("its own inbox and subjects: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestTheOperatorsUser: the CLI's NATS user lists dead letters and replays
// one to the subject it came from, and may not manage streams or read
// another user's inbox.
func TestTheOperatorsUser(t *testing.T) {
	url := securedNATS(t)
	ctx := context.Background()
	curatorBus, err := bus.Connect(ctx, bus.Config{URL: url, User: "curator", Password: "pw-curator", Replicas: 1}, "curator")
	if err != nil {
		t.Fatal(err)
	}
	defer curatorBus.Close(ctx)
	if err := curatorBus.EnsureStreams(ctx); err == nil {
		t.Error("the curator's user created or updated the streams")
	}
	if err := curatorBus.CheckStreams(ctx); err != nil {
		t.Fatal(err)
	}
	// A message the curator's consumer could not read, and its dead
	// letter, as its handler writes one (a replay checks the one against
	// the other).
	orig, err := curatorBus.JetStream().Publish(ctx, events.SubjectEpisodeUpserted, []byte("not an event"))
	if err != nil {
		t.Fatal(err)
	}
	dl := nats.NewMsg(events.DeadLetterSubject(events.StreamCuration, events.CuratorEpisodes.Config.Durable))
	dl.Data = []byte("not an event")
	for k, v := range map[string]string{events.HeaderDLQReason: "undecodable", events.HeaderDLQStream: events.StreamCuration,
		events.HeaderDLQConsumer: events.CuratorEpisodes.Config.Durable, events.HeaderDLQSubject: events.SubjectEpisodeUpserted,
		events.HeaderDLQSequence: fmt.Sprint(orig.Sequence), events.HeaderDLQDeliveries: "1"} {
		dl.Header.Set(k, v)
	}
	if _, err := curatorBus.JetStream().PublishMsg(ctx, dl); err != nil {
		t.Fatal(err)
	}
	op, err := bus.Connect(ctx, bus.Config{URL: url, User: "operator", Password: "pw-operator", Replicas: 1}, "archivist-cli")
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close(ctx)
	list, err := op.DeadLetters(ctx, 0, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters as the operator: %+v %v", list, err)
	}
	if _, err := op.Replay(ctx, list[0].Seq, "operator"); err != nil {
		t.Fatalf("replay as the operator: %v", err)
	}
	if list, err := op.DeadLetters(ctx, 0, 10); err != nil || len(list) != 0 {
		t.Errorf("dead letters after the replay: %+v %v", list, err)
	}
	c := connectAs(t, url, "operator")
	c.refused("delete a stream", func() error { return c.nc.Publish("$JS.API.STREAM.DELETE."+events.StreamCuration, nil) })
	c.refused("read the curator's replies", func() error { _, err := c.nc.SubscribeSync(events.InboxPrefix("curator") + ".>"); return err })
}

// userConn is a raw NATS connection as one user of the generated auth.conf
// (with its inbox prefix), collecting the server's asynchronous errors.
type userConn struct {
	t    *testing.T
	nc   *nats.Conn
	errs chan error
}

func connectAs(t *testing.T, url, user string) *userConn {
	t.Helper()
	c := &userConn{t: t, errs: make(chan error, 10)}
	nc, err := nats.Connect(url, nats.UserInfo(user, "pw-"+user), nats.CustomInboxPrefix(events.InboxPrefix(user)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	return c
}

// refused runs do and wants the server to answer it with a permissions
// violation.
func (c *userConn) refused(what string, do func() error) {
	c.t.Helper()
	if err := do(); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	c.nc.Flush()
	select {
	case err := <-c.errs:
		if !strings.Contains(err.Error(), "Permissions Violation") {
			c.t.Errorf("%s: %v, want a permissions violation", what, err)
		}
	case <-time.After(3 * time.Second):
		c.t.Errorf("%s: allowed", what)
	}
}

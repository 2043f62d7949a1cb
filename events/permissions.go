package events

import (
	"fmt"
	"github.com/nats-io/nats.go/jetstream"
	"regexp"
	"slices"
	"strings"
)

// Services names every Archivist service that connects to NATS: each has a
// NATS user of its own (charts/archivist-nats/files/auth.conf, rendered by AuthConfig).
var Services = []string{"curator", "pwa", "cwa", "researcher", "indexer", "aggregator", "auditor"}

// ExternalUsers are the NATS users of people and tools outside the
// services: the operator's CLI (`archivist work --pipeline bus`, dead letters) connects as "operator";
// `archivist migrate` manages the streams as "deploy"; the dashboard looks
// as "dashboard". Each curating system has a user of its own (Publisher).
var ExternalUsers = []string{"operator", "deploy", "dashboard"}

// Users are every NATS user charts/archivist-nats/files/auth.conf declares.
func Users() []string { return append(slices.Clone(Services), ExternalUsers...) }

// access is what one service does on NATS.
type access struct {
	publishes  []string   // subjects it publishes (JetStream or core)
	subscribes []string   // core subjects it subscribes to
	consumers  []Consumer // durable consumers it creates and reads
	inspects   []Consumer // durable consumers it only creates and looks at
	reads      []string   // streams whose last message per subject it reads
	buckets    []string   // key-value buckets it reads (the deploy identity makes them)
	bucketPuts bool       // whether it writes to those buckets
	external   bool       // a system outside Archivist: its publishes only
}

// accessOf is each service's use of NATS. Every service also ensures the
// streams, publishes dead letters and runs the dead-letter mover (common).
var accessOf = map[string]access{
	"curator": {
		// Ingest lives in the curator: it records and deletes archive objects.
		// Its HTTP API publishes curation events for every source, and it
		// publishes each source's rejections.
		publishes: []string{SubjectEpisodeUpserted, SubjectClipUpserted, SubjectGraphMatched, SubjectWorkUpserted + ".>",
			SubjectObjectRecorded, SubjectObjectDeleted, SubjectRejectedPrefix + ".*",
			// It makes each source's pull consumer of its rejections
			// (RejectedConsumer): a publisher may only read it.
			"$JS.API.CONSUMER.CREATE." + StreamRejected + ".*." + SubjectRejectedPrefix + ".*"},
		consumers: []Consumer{CuratorEpisodes, CuratorClips, CuratorMerger},
		// A work is published only over an older version of it
		// (bus.PublishNewest): the merger reads the work's last message.
		reads: []string{StreamWorks},
	},
	"pwa": {
		publishes:  []string{SubjectWorkItem, SubjectMediaRetired},
		subscribes: []string{SubjectPWAWake},
		consumers:  []Consumer{PWAWorks, PWARecorded},
		inspects:   []Consumer{Researchers}, // the queue's depth
		buckets:    []string{BucketResearchers},
	},
	"cwa": {
		publishes: []string{SubjectPWAWake},
		consumers: []Consumer{CWAResults},
	},
	"researcher": {
		publishes:  []string{SubjectResearchCompleted, SubjectPWAWake},
		consumers:  []Consumer{Researchers, ResearchersRetired},
		buckets:    []string{BucketResearchers},
		bucketPuts: true,
	},
	"indexer": {
		publishes: []string{SubjectIndexTask, SubjectIndexCDXReady},
		consumers: []Consumer{IndexerRecorded, IndexerDeleted, Indexers},
	},
	"aggregator": {
		consumers: []Consumer{AggregatorReady, AggregatorDeleted},
	},
	"auditor": {
		publishes:  []string{SubjectAuditTaskHigh, SubjectAuditTaskLow},
		subscribes: []string{"audit.task.>"}, // a new task wakes the idle worker manager
		consumers:  []Consumer{AuditorRecorded, AuditorDeleted, AuditorReplicate, AuditorUnreplicate, AuditorHigh, AuditorLow},
	},
	"operator":  {external: true}, // operatorPermissions
	"deploy":    {external: true}, // deployPermissions
	"dashboard": {external: true}, // dashboardPermissions
}

// InboxPrefix is the inbox prefix of a NATS user: its replies (JetStream's
// included) come there, and only it may subscribe to it.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// DeadLetterMoverOf is the dead-letter mover of a service: the consumer of
// the max-deliveries advisories of the service's own consumers. A name that
// is no service (a tool, a test) gets the mover of every consumer.
func DeadLetterMoverOf(service string) Consumer {
	a, ok := accessOf[service]
	if !ok {
		return DeadLetterMover
	}
	c := DeadLetterMover
	c.Config.Durable = DeadLetterMover.Config.Durable + "-" + service
	c.Config.Description = "moves the max-delivered messages of the " + service + "'s consumers into DEADLETTER"
	for _, own := range a.consumers {
		c.Config.FilterSubjects = append(c.Config.FilterSubjects, maxDeliveriesAdvisory+"."+own.Stream+"."+own.Config.Durable)
	}
	return c
}

// ConsumersOf are the durable consumers whose work a service takes (its
// backlogs: the consumers' lag is exported as a gauge).
func ConsumersOf(service string) []Consumer { return slices.Clone(accessOf[service].consumers) }

// maxDeliveriesAdvisory prefixes the advisory JetStream raises when a
// message reaches a consumer's MaxDeliver (.STREAM.CONSUMER follows).
const maxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"

// Permissions are a NATS user's allowed subjects.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// PermissionsOf returns the least a service needs: its own subjects, and the
// JetStream API calls for its streams, consumers and buckets.
func PermissionsOf(service string) (Permissions, error) {
	a, ok := accessOf[service]
	if !ok {
		return Permissions{}, fmt.Errorf("no NATS access is declared for service %q", service)
	}
	switch service {
	case "operator":
		return operatorPermissions(), nil
	case "deploy":
		return deployPermissions(), nil
	case "dashboard":
		return dashboardPermissions(), nil
	}
	if a.external {
		return Permissions{Publish: slices.Clone(a.publishes), Subscribe: []string{InboxPrefix(service) + ".>"}}, nil
	}
	pub := []string{"$JS.API.INFO"}
	pub = append(pub, a.publishes...)
	// Streams are made by the deploy identity; a service only looks.
	for _, s := range Streams(1) {
		pub = append(pub, "$JS.API.STREAM.INFO."+s.Name)
	}
	// Dead letters of its own consumers only; its dead-letter mover reads
	// and deletes the message an advisory names in the streams it consumes,
	// and no other.
	mover := DeadLetterMoverOf(service)
	pub = append(pub, DeadLetterSubject(mover.Stream, mover.Config.Durable),
		// the shared mover of earlier versions, removed at start
		"$JS.API.CONSUMER.DELETE."+DeadLetterMover.Stream+"."+DeadLetterMover.Config.Durable)
	for _, c := range a.consumers {
		pub = append(pub, DeadLetterSubject(c.Stream, c.Config.Durable),
			"$JS.API.STREAM.MSG.GET."+c.Stream, "$JS.API.STREAM.MSG.DELETE."+c.Stream)
	}
	for _, c := range append([]Consumer{mover}, a.consumers...) {
		d := c.Config.Durable
		pub = append(pub,
			"$JS.API.CONSUMER.CREATE."+c.Stream+"."+d, "$JS.API.CONSUMER.CREATE."+c.Stream+"."+d+".>",
			"$JS.API.CONSUMER.INFO."+c.Stream+"."+d, "$JS.API.CONSUMER.MSG.NEXT."+c.Stream+"."+d,
			"$JS.ACK."+c.Stream+"."+d+".>")
	}
	for _, c := range a.inspects {
		d := c.Config.Durable
		pub = append(pub, "$JS.API.CONSUMER.CREATE."+c.Stream+"."+d, "$JS.API.CONSUMER.CREATE."+c.Stream+"."+d+".>",
			"$JS.API.CONSUMER.INFO."+c.Stream+"."+d)
	}
	for _, st := range a.reads {
		pub = append(pub, "$JS.API.STREAM.MSG.GET."+st, "$JS.API.DIRECT.GET."+st+".>")
	}
	for _, b := range a.buckets {
		st := "KV_" + b
		// The deploy identity makes the bucket; a service binds to it.
		pub = append(pub, "$JS.API.STREAM.INFO."+st,
			"$JS.API.STREAM.MSG.GET."+st, "$JS.API.DIRECT.GET."+st+".>",
			"$JS.API.CONSUMER.CREATE."+st+".>", "$JS.API.CONSUMER.DELETE."+st+".>", "$JS.FC."+st+".>")
		if a.bucketPuts {
			pub = append(pub, "$KV."+b+".>")
		}
	}
	sub := append([]string{InboxPrefix(service) + ".>"}, a.subscribes...)
	slices.Sort(pub)
	return Permissions{Publish: slices.Compact(pub), Subscribe: sub}, nil
}

// deployPermissions are `archivist migrate`'s: it creates and updates the
// streams, the consumers whose interest keeps an interest stream's events
// (InterestConsumers) and the services' key-value buckets, and nothing
// else.
func deployPermissions() Permissions {
	pub := []string{"$JS.API.INFO"}
	for _, c := range InterestConsumers {
		d := c.Config.Durable
		pub = append(pub, "$JS.API.CONSUMER.CREATE."+c.Stream+"."+d, "$JS.API.CONSUMER.CREATE."+c.Stream+"."+d+".>")
	}
	names := []string{}
	for _, s := range Streams(1) {
		names = append(names, s.Name)
	}
	for _, svc := range Services {
		for _, b := range accessOf[svc].buckets {
			names = append(names, "KV_"+b)
		}
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		pub = append(pub, "$JS.API.STREAM.CREATE."+n, "$JS.API.STREAM.UPDATE."+n, "$JS.API.STREAM.INFO."+n)
	}
	return Permissions{Publish: pub, Subscribe: []string{InboxPrefix("deploy") + ".>"}}
}

// operatorPermissions are the CLI's: read stream state, read and delete
// dead letters, and replay one to the subject it came from (any subject a
// service publishes); no stream or consumer management, no other inbox.
func operatorPermissions() Permissions {
	pub := []string{"$JS.API.INFO", "$JS.API.STREAM.MSG.GET." + StreamDeadLetter, "$JS.API.STREAM.MSG.DELETE." + StreamDeadLetter}
	for _, s := range Streams(1) {
		// Every stream's messages are read to check a dead letter against
		// the message it says it was, before it is replayed.
		pub = append(pub, "$JS.API.STREAM.INFO."+s.Name, "$JS.API.STREAM.MSG.GET."+s.Name)
	}
	for _, svc := range Services {
		pub = append(pub, accessOf[svc].publishes...)
	}
	slices.Sort(pub)
	return Permissions{Publish: slices.Compact(pub), Subscribe: []string{InboxPrefix("operator") + ".>"}}
}

// dashboardPermissions are the dashboard's: it only looks: the streams'
// state, the lag of every service's consumers, and the dead letters (read,
// never deleted or replayed).
func dashboardPermissions() Permissions {
	pub := []string{"$JS.API.INFO", "$JS.API.STREAM.MSG.GET." + StreamDeadLetter}
	for _, s := range Streams(1) {
		pub = append(pub, "$JS.API.STREAM.INFO."+s.Name)
	}
	for _, svc := range Services {
		for _, c := range accessOf[svc].consumers {
			pub = append(pub, "$JS.API.CONSUMER.INFO."+c.Stream+"."+c.Config.Durable)
		}
	}
	slices.Sort(pub)
	return Permissions{Publish: slices.Compact(pub), Subscribe: []string{InboxPrefix("dashboard") + ".>"}}
}

// Publisher is a curating system's NATS user: its name, the one source it
// publishes as, and its password's bcrypt hash (`archivist key new NAME
// --nats --source SOURCE` makes the password and the line; the server keeps
// only the hash).
type Publisher struct {
	Name, Source, PasswordHash string
}

// ParsePublishers reads a publishers file: a line per curating system,
//
//	NAME SOURCE BCRYPT-HASH-OF-ITS-PASSWORD
//
// with blank lines and lines starting with # ignored.
func ParsePublishers(text string) ([]Publisher, error) {
	var out []Publisher
	seen := map[string]bool{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("publishers line %d: want NAME SOURCE BCRYPT-HASH", n+1)
		}
		p := Publisher{Name: f[0], Source: f[1], PasswordHash: f[2]}
		if err := ValidateSource("name", p.Name); err != nil {
			return nil, fmt.Errorf("publishers line %d: %w", n+1, err)
		}
		if slices.Contains(Users(), p.Name) || seen[p.Name] {
			return nil, fmt.Errorf("publishers line %d: the user %q is already taken", n+1, p.Name)
		}
		if err := ValidateSource("source", p.Source); err != nil {
			return nil, fmt.Errorf("publishers line %d: %w", n+1, err)
		}
		if !bcryptHash.MatchString(p.PasswordHash) {
			return nil, fmt.Errorf("publishers line %d: the third field is the password's bcrypt hash ($2a$…, $2b$…)", n+1)
		}
		seen[p.Name] = true
		out = append(out, p)
	}
	return out, nil
}

var bcryptHash = regexp.MustCompile(`^\$2[abxy]?\$[0-9]{2}\$[./A-Za-z0-9]{53}$`)

// PublisherPermissions are a curating system's: publish its own source's
// curation events (curation.<source>.episode.upserted, ….clip.upserted)
// and read its own rejections, live (a subscription to rejected.<source>)
// or kept (the pull consumer rejected-<source> on REJECTED, filtered to its
// subject, which the curator makes: RejectedConsumer); replies come to its
// inbox prefix _INBOX_<name>. It may not create or change the consumer:
// nats-server does not check a push consumer's deliver subject against
// its creator's permissions (nats-io/nats-server#8274), so a publisher
// that could would have its rejections delivered onto others' subjects.
func PublisherPermissions(name, source string) Permissions {
	durable := RejectedConsumer(source).Durable
	return Permissions{
		Publish: []string{CurationSubject(source, TypeEpisodeUpserted), CurationSubject(source, TypeClipUpserted),
			"$JS.API.CONSUMER.INFO." + StreamRejected + "." + durable,
			"$JS.API.CONSUMER.MSG.NEXT." + StreamRejected + "." + durable,
			"$JS.ACK." + StreamRejected + "." + durable + ".>"},
		Subscribe: []string{InboxPrefix(name) + ".>", RejectedSubject(source)},
	}
}

// RejectedConsumer is source's pull consumer of its rejections on
// REJECTED, which the curator makes when it first sees the source and its
// publisher reads.
func RejectedConsumer(source string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: "rejected-" + source, FilterSubject: RejectedSubject(source), AckPolicy: jetstream.AckExplicitPolicy,
		Description: "The rejections of source " + source + ", for its publisher to read (the curator makes it)."}
}

// AuthConfig renders the NATS server's authorization block: one user per
// service with its permissions, each password taken from the server's
// environment variable NATS_PASSWORD_<SERVICE>, and one per curating system
// of publishers, with its password's bcrypt hash.
func AuthConfig(publishers []Publisher) (string, error) {
	var b strings.Builder
	b.WriteString("# NATS users of the Archivist services (one per service, allowed only its own\n")
	b.WriteString("# subjects and JetStream calls) and of curating systems (one per system: its own\n")
	b.WriteString("# source's curation events and rejections only).\n")
	b.WriteString("# Each user's replies come to its own inbox prefix, _INBOX_<user>.\n#\n")
	b.WriteString("# Generated from events/permissions.go and charts/archivist-nats/files/publishers by\n")
	b.WriteString("# `archivist nats-auth --publishers charts/archivist-nats/files/publishers` (or `go test ./events\n")
	b.WriteString("# -run TestAuthConfig -update`); do not edit by hand. NATS reloads it without a restart.\n")
	b.WriteString("# Services' passwords come from the server's environment: NATS_PASSWORD_<USER>.\n")
	b.WriteString("authorization {\n  users: [\n")
	write := func(user, password string, p Permissions) {
		fmt.Fprintf(&b, "    {\n      user: %s\n      password: %s\n      permissions: {\n", user, password)
		fmt.Fprintf(&b, "        publish: {allow: [%s]}\n", quoteAll(p.Publish))
		fmt.Fprintf(&b, "        subscribe: {allow: [%s]}\n", quoteAll(p.Subscribe))
		b.WriteString("      }\n    }\n")
	}
	for _, svc := range Users() {
		p, err := PermissionsOf(svc)
		if err != nil {
			return "", err
		}
		write(svc, "$NATS_PASSWORD_"+strings.ToUpper(svc), p)
	}
	for _, p := range publishers {
		write(p.Name, `"`+p.PasswordHash+`"`, PublisherPermissions(p.Name, p.Source))
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = `"` + s + `"`
	}
	return strings.Join(q, ", ")
}

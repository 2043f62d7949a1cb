package events

import (
	"fmt"
	"slices"
	"strings"
)

// Services names every Archivist service that connects to NATS: each has a
// NATS user of its own (k8s/nats/auth.conf, rendered by AuthConfig).
var Services = []string{"curator", "pwa", "cwa", "researcher", "indexer", "aggregator", "auditor"}

// access is what one service does on NATS.
type access struct {
	publishes  []string   // subjects it publishes (JetStream or core)
	subscribes []string   // core subjects it subscribes to
	consumers  []Consumer // durable consumers it creates and reads
	inspects   []Consumer // durable consumers it only creates and looks at
	buckets    []string   // key-value buckets it creates and reads
	bucketPuts bool       // whether it writes to those buckets
}

// accessOf is each service's use of NATS. Every service also ensures the
// streams, publishes dead letters and runs the dead-letter mover (common).
var accessOf = map[string]access{
	"curator": {
		// Ingest lives in the curator: it records and deletes archive objects.
		publishes: []string{SubjectEpisodeUpserted, SubjectClipUpserted, SubjectGraphMatched, SubjectWorkUpserted,
			SubjectObjectRecorded, SubjectObjectDeleted},
		consumers: []Consumer{CuratorEpisodes, CuratorClips, CuratorMerger},
	},
	"pwa": {
		publishes:  []string{SubjectWorkItem},
		subscribes: []string{SubjectPWAWake},
		consumers:  []Consumer{PWAWorks},
		inspects:   []Consumer{Researchers}, // the queue's depth
		buckets:    []string{BucketResearchers},
	},
	"cwa": {
		publishes: []string{SubjectPWAWake},
		consumers: []Consumer{CWAResults},
	},
	"researcher": {
		publishes:  []string{SubjectResearchCompleted, SubjectPWAWake},
		consumers:  []Consumer{Researchers},
		buckets:    []string{BucketResearchers},
		bucketPuts: true,
	},
	"indexer": {
		publishes: []string{SubjectIndexTask, SubjectIndexCDXReady},
		consumers: []Consumer{IndexerRecorded, Indexers},
	},
	"aggregator": {
		consumers: []Consumer{AggregatorReady},
	},
	"auditor": {
		publishes:  []string{SubjectAuditTaskHigh, SubjectAuditTaskLow},
		subscribes: []string{"audit.task.>"}, // a new task wakes the idle worker manager
		consumers:  []Consumer{AuditorRecorded, AuditorDeleted, AuditorHigh, AuditorLow},
	},
}

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
	pub := []string{"$JS.API.INFO", SubjectDeadLetterPrefix + ".>"}
	pub = append(pub, a.publishes...)
	for _, s := range Streams(1) {
		pub = append(pub, "$JS.API.STREAM.CREATE."+s.Name, "$JS.API.STREAM.UPDATE."+s.Name, "$JS.API.STREAM.INFO."+s.Name)
	}
	// The dead-letter mover reads and deletes the message an advisory names,
	// in whichever stream it is.
	pub = append(pub, "$JS.API.STREAM.MSG.GET.*", "$JS.API.STREAM.MSG.DELETE.*")
	for _, c := range append([]Consumer{DeadLetterMover}, a.consumers...) {
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
	for _, b := range a.buckets {
		st := "KV_" + b
		pub = append(pub, "$JS.API.STREAM.CREATE."+st, "$JS.API.STREAM.UPDATE."+st, "$JS.API.STREAM.INFO."+st,
			"$JS.API.CONSUMER.CREATE."+st+".>", "$JS.API.CONSUMER.DELETE."+st+".>", "$JS.FC."+st+".>")
		if a.bucketPuts {
			pub = append(pub, "$KV."+b+".>")
		}
	}
	sub := append([]string{"_INBOX.>"}, a.subscribes...)
	slices.Sort(pub)
	return Permissions{Publish: slices.Compact(pub), Subscribe: sub}, nil
}

// AuthConfig renders the NATS server's authorization block: one user per
// service with its permissions, each password taken from the server's
// environment variable NATS_PASSWORD_<SERVICE>.
func AuthConfig() (string, error) {
	var b strings.Builder
	b.WriteString("# NATS users of the Archivist services: one per service, allowed only its own\n")
	b.WriteString("# subjects and the JetStream API calls it needs. Generated from events/permissions.go\n")
	b.WriteString("# by `go test ./events -run TestAuthConfig -update`; do not edit by hand.\n")
	b.WriteString("# Passwords come from the server's environment: NATS_PASSWORD_<SERVICE>.\n")
	b.WriteString("authorization {\n  users: [\n")
	for _, svc := range Services {
		p, err := PermissionsOf(svc)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "    {\n      user: %s\n      password: $NATS_PASSWORD_%s\n      permissions: {\n", svc, strings.ToUpper(svc))
		fmt.Fprintf(&b, "        publish: {allow: [%s]}\n", quoteAll(p.Publish))
		fmt.Fprintf(&b, "        subscribe: {allow: [%s]}\n", quoteAll(p.Subscribe))
		b.WriteString("      }\n    }\n")
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

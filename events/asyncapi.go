package events

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// AsyncAPIVersion is the version of the AsyncAPI document AsyncAPI renders.
const AsyncAPIVersion = "3.0.0"

// addresses are the subjects each event type travels on, as AsyncAPI
// channel addresses with their parameters: a curation event on its
// source's subject, a work on its own, an audit task on one of two
// priorities.
var addresses = map[string][]string{
	TypeEpisodeUpserted: {"curation.{source}.episode.upserted"},
	TypeClipUpserted:    {"curation.{source}.clip.upserted"},
	TypeRejected:        {SubjectRejectedPrefix + ".{source}"},
	TypeWorkUpserted:    {SubjectWorkUpserted + ".{kind}.{key_digest}"},
	TypeAuditTask:       {SubjectAuditTaskHigh, SubjectAuditTaskLow},
}

var parameters = map[string]map[string]any{
	"source":     {"description": "The curating system: 1 to 64 of a-z, 0-9, '.', '_', '-'. A publisher's NATS user may publish only on its own."},
	"kind":       {"enum": []string{KindEpisode, KindClip}, "description": "The work's kind."},
	"key_digest": {"description": "The first 12 bytes of the SHA-256 of the work's key, in hex (events.WorkSubject): each work on a subject of its own."},
}

// AsyncAPI renders the AsyncAPI 3 document of every event Archivist's
// services and curating systems exchange over NATS: a channel per subject
// (its address, parameters and message, the payload the schema in
// schemas/ describes), and an operation per service or curating system
// that sends or receives it, from the declared access (accessOf) and the
// durable consumers. It is generated, never edited: schemas/asyncapi.json
// is checked against it by the tests.
func AsyncAPI() ([]byte, error) {
	channels := map[string]any{}
	operations := map[string]any{}
	messages := map[string]any{}
	for _, k := range Kinds() {
		name := camel(k.Type)
		version := k.New().EventSchemaVersion()
		messages[name] = map[string]any{
			"name":        k.Type,
			"title":       fmt.Sprintf("%s (schema version %d)", k.Type, version),
			"contentType": "application/msgpack",
			"headers": map[string]any{"type": "object", "required": []string{"Nats-Msg-Id"},
				"properties": map[string]any{
					"Nats-Msg-Id":    map[string]any{"type": "string", "description": "The envelope's id: JetStream de-duplicates on it."},
					"Archivist-Type": map[string]any{"const": k.Type},
				}},
			"payload": map[string]any{"schemaFormat": "application/schema+json;version=draft-2020-12",
				"schema": map[string]any{"$ref": fmt.Sprintf("./%s.v%d.json", k.Type, version)}},
		}
		addrs, ok := addresses[k.Type]
		if !ok {
			addrs = []string{k.Subject}
		}
		for i, addr := range addrs {
			ch := name
			if len(addrs) > 1 {
				ch = camel(addr)
			}
			c := map[string]any{
				"address":  addr,
				"messages": map[string]any{name: map[string]any{"$ref": "#/components/messages/" + name}},
			}
			if ps := addressParameters(addr); len(ps) > 0 {
				c["parameters"] = ps
			}
			if stream := streamOf(addrs[i]); stream != "" {
				c["description"] = "Kept in the JetStream stream " + stream + "."
			}
			channels[ch] = c
			for _, who := range sendersOf(addr) {
				operations[camel(who+" sends "+addr)] = map[string]any{
					"action": "send", "title": who + " publishes " + k.Type,
					"channel":  map[string]any{"$ref": "#/channels/" + ch},
					"messages": []any{map[string]any{"$ref": "#/channels/" + ch + "/messages/" + name}},
				}
			}
			for _, c := range receiversOf(addr) {
				operations[camel(c.who+" receives "+addr)] = map[string]any{
					"action": "receive", "title": c.who + " consumes " + k.Type + " (" + c.how + ")",
					"channel":  map[string]any{"$ref": "#/channels/" + ch},
					"messages": []any{map[string]any{"$ref": "#/channels/" + ch + "/messages/" + name}},
				}
			}
		}
	}
	doc := map[string]any{
		"asyncapi": AsyncAPIVersion,
		"info": map[string]any{
			"title":   "Archivist events",
			"version": "1",
			"description": "The msgpack events of Archivist on NATS JetStream. Each message is the envelope (id, type, schema_version, producer, sent_at, payload) " +
				"with the headers Nats-Msg-Id and Archivist-Type. What may change within a schema version: docs/COMPATIBILITY.md. " +
				"Generated from events/ (events.AsyncAPI); do not edit.",
		},
		"defaultContentType": "application/msgpack",
		"servers": map[string]any{
			"production": map[string]any{"host": "nats.nats.svc.cluster.local:4222", "protocol": "nats", "description": "The deployment's NATS cluster: TLS with a client certificate of its CA (mutual TLS), a NATS user per service and per curating system (charts/archivist-nats/files/auth.conf), replies to the user's inbox prefix _INBOX_<user>.",
				"security": []any{map[string]any{"$ref": "#/components/securitySchemes/user"}, map[string]any{"$ref": "#/components/securitySchemes/clientCertificate"}}},
			"development": map[string]any{"host": "127.0.0.1:4222", "protocol": "nats", "description": "archivist dev's embedded server: no authentication, this machine only."},
		},
		"channels":   channels,
		"operations": operations,
		"components": map[string]any{
			"messages": messages,
			"securitySchemes": map[string]any{
				"user":              map[string]any{"type": "userPassword", "description": "The NATS user of the service or curating system (archivist key new NAME --nats --source SOURCE)."},
				"clientCertificate": map[string]any{"type": "X509", "description": "A client certificate of the NATS CA (verify: true)."},
			},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// addressParameters are the parameters an address names.
func addressParameters(addr string) map[string]any {
	ps := map[string]any{}
	for _, t := range strings.Split(addr, ".") {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			name := strings.Trim(t, "{}")
			ps[name] = parameters[name]
		}
	}
	return ps
}

// natsPattern is an address as a NATS subject pattern (a parameter is *).
func natsPattern(addr string) string {
	t := strings.Split(addr, ".")
	for i := range t {
		if strings.HasPrefix(t[i], "{") {
			t[i] = "*"
		}
	}
	return strings.Join(t, ".")
}

// streamOf names the stream that keeps addr's messages.
func streamOf(addr string) string {
	for _, s := range Streams(1) {
		for _, subj := range s.Subjects {
			if subjectMatches(subj, natsPattern(addr)) {
				return s.Name
			}
		}
	}
	return ""
}

// sendersOf are the services (and, for curation events, "a curating
// system") whose NATS users may publish on addr.
func sendersOf(addr string) []string {
	p := natsPattern(addr)
	var out []string
	for _, svc := range Services {
		for _, pub := range accessOf[svc].publishes {
			if subjectMatches(pub, p) {
				out = append(out, svc)
				break
			}
		}
	}
	if strings.HasPrefix(addr, "curation.{source}.") {
		out = append(out, "a curating system")
	}
	slices.Sort(out)
	return out
}

type receiver struct{ who, how string }

// receiversOf are the durable consumers (their services) that read addr,
// and for rejections the curating system they go to.
func receiversOf(addr string) []receiver {
	p, stream := natsPattern(addr), streamOf(addr)
	var out []receiver
	for _, svc := range Services {
		for _, c := range accessOf[svc].consumers {
			filters := slices.Clone(c.Config.FilterSubjects)
			if c.Config.FilterSubject != "" {
				filters = append(filters, c.Config.FilterSubject)
			}
			if len(filters) == 0 && c.Stream == stream {
				// Unfiltered: the whole stream.
				out = append(out, receiver{svc, "durable consumer " + c.Stream + "/" + c.Config.Durable})
				continue
			}
			for _, f := range filters {
				if subjectMatches(f, p) || subjectMatches(p, f) {
					out = append(out, receiver{svc, "durable consumer " + c.Stream + "/" + c.Config.Durable})
					break
				}
			}
		}
	}
	if strings.HasPrefix(addr, SubjectRejectedPrefix+".") {
		out = append(out, receiver{"a curating system", "its own source's, live or through the pull consumer rejected-<source> on " + StreamRejected})
	}
	return out
}

// subjectMatches reports whether the NATS pattern pattern covers subject
// (itself a subject or a pattern whose wildcards pattern also has).
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range p {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) {
			return false
		}
		if t != "*" && t != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

// camel makes an AsyncAPI id of s: its words joined, each after the first
// capitalised ("curation.episode.upserted" → "curationEpisodeUpserted").
func camel(s string) string {
	words := strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	for i := 1; i < len(words); i++ {
		words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
	}
	return strings.Join(words, "")
}

package work

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// filterParams are the query parameters of a filter (ParseFilter reads
// them), with what each means.
var filterParams = []struct{ name, doc string }{
	{"pipeline", "one pipeline: ingest, mail (the curator), research (the pwa), index (the indexer), audit (the auditor)"},
	{"kind", "one kind of item: job, batch, mail, episode, file, request, repair, check"},
	{"id", "one item's id in its pipeline"},
	{"state", "a state the item is in (repeat, or comma-separate, for any of several)"},
	{"collection", "an ingest collection (profile)"},
	{"submitter", "a depositor (a publisher's own, whatever it asks)"},
	{"older_than", "in its state at least this long: a Go duration (90m, 36h) or days (7d)"},
	{"query", "an id, a key (ARK, local id, file name or key, URL, episode, media key) exactly, or words of the error"},
}

// OpenAPI is the OpenAPI 3.1 document of the work routes (Handle), from
// the routes and the types they answer with: schemas/openapi.json.
func OpenAPI() ([]byte, error) {
	params := []any{}
	for _, p := range filterParams {
		params = append(params, map[string]any{"name": p.name, "in": "query", "description": p.doc, "schema": map[string]any{"type": "string"}})
	}
	verbs := make([]string, len(Verbs))
	for i, v := range Verbs {
		verbs[i] = string(v)
	}
	errResp := func(what string) map[string]any {
		return map[string]any{"description": what, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	}
	ok := func(what, schema string) map[string]any {
		return map[string]any{"description": what, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + schema}}}}
	}
	intParam := func(name, doc string) map[string]any {
		return map[string]any{"name": name, "in": "query", "description": doc, "schema": map[string]any{"type": "integer", "minimum": 0}}
	}
	findParams := append(append([]any{}, params...), map[string]any{"name": "after", "in": "query", "description": "the cursor of the page after (a page's next)", "schema": map[string]any{"type": "string"}},
		intParam("limit", "items a page: 1 to 500, 50 when absent"))
	actParams := append([]any{map[string]any{"name": "verb", "in": "path", "required": true, "schema": map[string]any{"type": "string", "enum": verbs}}}, params...)
	actParams = append(actParams, map[string]any{"name": "dry_run", "in": "query", "description": "true: count what would move, moving nothing", "schema": map[string]any{"type": "boolean"}},
		intParam("confirm", "act, if this many items would move now (the dry run's count)"))
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Archivist work API", "version": "1",
			"description": "The archive's work across the pipelines, found with one filter and moved with one set of verbs (pkg/work; docs/work.md). " +
				"Served by the curator (ingest, mail), the pwa (research), the indexer (index) and the auditor (audit), each for its own work. " +
				"Every request carries an API key or OIDC token (Authorization: Bearer). A publisher finds and acts on its own work only; readers find; operators act."},
		"servers": []any{
			map[string]any{"url": "http://curator:8080", "description": "ingest and mail"},
			map[string]any{"url": "http://pwa:8081", "description": "research"},
			map[string]any{"url": "http://auditor:8082", "description": "audit"},
			map[string]any{"url": "http://indexer:8083", "description": "index"},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
		"paths": map[string]any{
			"/v1/work": map[string]any{"get": map[string]any{"operationId": "findWork", "summary": "A page of the items a filter matches, the latest moved first",
				"parameters": findParams,
				"responses":  map[string]any{"200": ok("a page", "Page"), "400": errResp("a bad filter, cursor or limit"), "401": errResp("no known key"), "403": errResp("the caller's role may not")}}},
			"/v1/work/{verb}": map[string]any{"post": map[string]any{"operationId": "actOnWork",
				"summary":     "A verb on every item a filter matches: its dry run (dry_run=true), or the action confirmed by the dry run's count (confirm=N)",
				"description": "The action moves the items in one transaction, if N is still what would move (409 with the new count otherwise), at most 100,000; it is logged whatever its outcome.",
				"parameters":  actParams,
				"responses": map[string]any{"200": map[string]any{"description": "the dry run's count, or the action done",
					"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"oneOf": []any{
						map[string]any{"$ref": "#/components/schemas/Count"}, map[string]any{"$ref": "#/components/schemas/Action"}}}}}},
					"400": errResp("a bad filter or verb, no count confirmed, or more than 100,000 items"), "401": errResp("no known key"), "403": errResp("the caller's role may not"),
					"409": errResp("the count moved since the dry run"), "422": errResp("no item the filter names takes the verb")}}},
			"/v1/work/rates": map[string]any{"get": map[string]any{"operationId": "workRates", "summary": "Each queue's flow: arrived and left over the window, the backlog, and when it would drain (staff: it counts every tenant's work)",
				"parameters": []any{map[string]any{"name": "window", "in": "query", "description": "the window: an age up to 7d, 10m when absent", "schema": map[string]any{"type": "string"}}},
				"responses": map[string]any{"200": map[string]any{"description": "the queues", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
					"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Rates"}}}}}, "400": errResp("a bad window"), "401": errResp("no known key"), "403": errResp("the caller's role may not")}}},
			"/v1/work/actions": map[string]any{"get": map[string]any{"operationId": "workActions", "summary": "The action log, newest first",
				"parameters": []any{map[string]any{"name": "actor", "in": "query", "description": "only this actor's (a publisher: its own)", "schema": map[string]any{"type": "string"}},
					intParam("before", "entries before this action number"), intParam("limit", "entries: 1 to 500, 50 when absent")},
				"responses": map[string]any{"200": map[string]any{"description": "the log", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
					"type": "array", "items": map[string]any{"$ref": "#/components/schemas/Action"}}}}}, "400": errResp("a bad number"), "401": errResp("no known key"), "403": errResp("the caller's role may not")}}},
		},
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{
				"Item": schemaOf(reflect.TypeFor[Item]()), "Page": schemaOf(reflect.TypeFor[Page]()), "Filter": schemaOf(reflect.TypeFor[Filter]()),
				"Count": schemaOf(reflect.TypeFor[Count]()), "Action": schemaOf(reflect.TypeFor[Action]()), "Rates": schemaOf(reflect.TypeFor[Rates]()),
				"Verb":  map[string]any{"type": "string", "enum": verbs},
				"Error": map[string]any{"type": "object", "properties": map[string]any{"error": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}}, "required": []any{"error"}},
			},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// schemaOf is the JSON Schema of a type as encoding/json writes it.
func schemaOf(t reflect.Type) map[string]any {
	switch t {
	case reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case reflect.TypeFor[time.Duration]():
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	case reflect.TypeFor[Verb]():
		return map[string]any{"$ref": "#/components/schemas/Verb"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := schemaOf(t.Elem())
		if typ, ok := s["type"].(string); ok {
			s["type"] = []any{typ, "null"}
		}
		return s
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Struct:
		props, required := map[string]any{}, []any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if f.Type == reflect.TypeFor[Filter]() {
				props[name] = map[string]any{"$ref": "#/components/schemas/Filter"}
			} else {
				props[name] = schemaOf(f.Type)
			}
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	return map[string]any{}
}

package events_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/archivist/archivist/events"
)

var update = flag.Bool("update", false, "rewrite the .msgpack.hex examples from the .json ones")

const schemaDir = "../schemas"

// jsonEnvelope is an envelope as the JSON examples write it: payload inline.
type jsonEnvelope struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	Producer      string          `json:"producer"`
	SentAt        time.Time       `json:"sent_at"`
	Payload       json.RawMessage `json:"payload"`
}

func TestSchemasAndExamples(t *testing.T) {
	for _, k := range events.Kinds() {
		t.Run(k.Type, func(t *testing.T) {
			v := k.New().EventSchemaVersion()
			base := fmt.Sprintf("%s.v%d", k.Type, v)
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			sch, err := c.Compile(filepath.Join(schemaDir, base+".json"))
			if err != nil {
				t.Fatalf("schema: %v", err)
			}

			// The JSON example: valid against the schema, decodable with the Go types.
			raw, err := os.ReadFile(filepath.Join(schemaDir, "examples", base+".json"))
			if err != nil {
				t.Fatal(err)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(doc); err != nil {
				t.Errorf("JSON example invalid: %v", err)
			}
			var je jsonEnvelope
			if err := json.Unmarshal(raw, &je); err != nil {
				t.Fatal(err)
			}
			fromJSON := k.New()
			dec := json.NewDecoder(bytes.NewReader(je.Payload))
			dec.DisallowUnknownFields()
			if err := dec.Decode(fromJSON); err != nil {
				t.Fatalf("JSON payload into Go: %v", err)
			}
			if err := fromJSON.Validate(); err != nil {
				t.Errorf("JSON payload fails Go validation: %v", err)
			}

			hexPath := filepath.Join(schemaDir, "examples", base+".msgpack.hex")
			if *update {
				env := events.Envelope{ID: je.ID, Type: je.Type, SchemaVersion: je.SchemaVersion, Producer: je.Producer, SentAt: je.SentAt}
				if env.Payload, err = msgpack.Marshal(fromJSON); err != nil {
					t.Fatal(err)
				}
				b, err := env.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(hexPath, []byte(hex.EncodeToString(b)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			// The msgpack example: the same event, decoded by the Go types...
			hx, err := os.ReadFile(hexPath)
			if err != nil {
				t.Fatal(err)
			}
			b, err := hex.DecodeString(strings.TrimSpace(string(hx)))
			if err != nil {
				t.Fatal(err)
			}
			env, err := events.Unmarshal(b)
			if err != nil {
				t.Fatalf("msgpack example: %v", err)
			}
			if env.ID != je.ID || env.Type != k.Type || !env.SentAt.Equal(je.SentAt) || env.Producer != je.Producer {
				t.Errorf("msgpack envelope %+v differs from the JSON example", env)
			}
			fromMsgpack := k.New()
			if err := msgpack.Unmarshal(env.Payload, fromMsgpack); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(fromMsgpack), normalize(fromJSON)) {
				t.Errorf("msgpack payload %+v differs from JSON payload %+v", fromMsgpack, fromJSON)
			}
			// ...and, read as a plain msgpack map, valid against the schema.
			var generic any
			if err := msgpack.Unmarshal(b, &generic); err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(jsonLike(generic)); err != nil {
				t.Errorf("msgpack example invalid against the schema: %v", err)
			}
		})
	}
}

// normalize re-encodes through JSON so that time zones compare equal.
func normalize(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// jsonLike turns a generic msgpack value into what a JSON decoder would
// produce: timestamps become RFC 3339 strings, integers json.Numbers.
func jsonLike(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonLike(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonLike(e)
		}
		return out
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return json.Number(fmt.Sprint(x))
	case float32, float64:
		return json.Number(fmt.Sprint(x))
	default:
		return v
	}
}

func TestEnvelopeRejectsIncompleteMaps(t *testing.T) {
	b, _ := msgpack.Marshal(map[string]any{"id": "x", "type": "curation.clip.upserted"})
	if _, err := events.Unmarshal(b); err == nil || !strings.Contains(err.Error(), "schema_version") {
		t.Errorf("incomplete envelope: %v", err)
	}
	if _, err := events.Unmarshal([]byte("not msgpack")); err == nil {
		t.Error("garbage decoded")
	}
}

func TestDecodeChecksTypeAndVersion(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env, err := events.New("t", &events.ClipUpserted{ID: "c", Media: events.Media{Key: "k"}, InitialCuratedAt: at, LatestCuratedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Decode[events.EpisodeUpserted](env); err == nil {
		t.Error("a clip decoded as an episode")
	}
	env.SchemaVersion = 2
	if _, err := events.Decode[events.ClipUpserted](env); err == nil {
		t.Error("a newer schema version decoded")
	}
	env.SchemaVersion = 1
	c, err := events.Decode[events.ClipUpserted](env)
	if err != nil || c.ID != "c" {
		t.Errorf("decode: %v %+v", err, c)
	}
	if env.SentAt.Nanosecond()%1000 != 0 {
		t.Errorf("sent_at %s not truncated to microseconds", env.SentAt)
	}
}

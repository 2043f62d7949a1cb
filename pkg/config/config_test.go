package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/archivist/archivist/pkg/config"
)

type sample struct {
	URL     string        `env:"DATABASE_URL"`
	Secret  string        `env:"S3_SECRET_ACCESS_KEY"`
	Timeout time.Duration `env:"TIMEOUT, default=5s"`
	Inner   struct {
		Port int `env:"PORT, default=8080"`
	}
}

func TestLoadAndRedact(t *testing.T) {
	var s sample
	err := config.Load(context.Background(), &s, envconfig.MapLookuper(map[string]string{
		"DATABASE_URL":         "postgres://app:hunter2@db:5432/archivist",
		"S3_SECRET_ACCESS_KEY": "very-secret",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Timeout != 5*time.Second || s.Inner.Port != 8080 {
		t.Errorf("defaults not applied: %+v", s)
	}
	vars := config.Vars(&s)
	var all []string
	for _, v := range vars {
		all = append(all, v.Name+"="+v.Value)
	}
	joined := strings.Join(all, " ")
	if strings.Contains(joined, "hunter2") || strings.Contains(joined, "very-secret") {
		t.Errorf("secrets shown: %s", joined)
	}
	if !strings.Contains(joined, "PORT=8080") || !strings.Contains(joined, "postgres://app:REDACTED@db:5432/archivist") {
		t.Errorf("vars: %s", joined)
	}
}

func TestLoadFailsFast(t *testing.T) {
	var s sample
	err := config.Load(context.Background(), &s, envconfig.MapLookuper(map[string]string{"TIMEOUT": "soon"}))
	if err == nil || !strings.Contains(err.Error(), "TIMEOUT") {
		t.Errorf("bad duration: %v", err)
	}
	// A variable of a nested struct is named too, not its Go field path.
	var n struct {
		Store struct {
			MaxConns int32 `env:"DATABASE_MAX_CONNS, default=10"`
		}
	}
	err = config.Load(context.Background(), &n, envconfig.MapLookuper(map[string]string{"DATABASE_MAX_CONNS": "x"}))
	if err == nil || !strings.HasPrefix(err.Error(), "configuration: DATABASE_MAX_CONNS: ") {
		t.Errorf("a nested variable's bad value: %v, want it named", err)
	}
}

// TestSecretsDoNotLeakPastRedaction: the leaks: a password in a
// query parameter, passwords holding / # @, the second URL of a
// comma-separated NATS_URL, and a key=value DSN.
func TestSecretsDoNotLeakPastRedaction(t *testing.T) {
	for in, secret := range map[string]string{
		"postgres://app@db:5432/archivist?sslmode=require&password=hunter2":    "hunter2",
		"postgres://app:p/a#s@s@db:5432/archivist":                             "p/a#s@s",
		"nats://a:one@n1:4222,nats://b:two@n2:4222":                            "two",
		"host=db user=app password=hunter3 dbname=archivist":                   "hunter3",
		"s3://bucket/?endpoint=s3.example&secret_key=abc123&access_key=AKIAXX": "abc123",
		// Split on commas or spaces before parsing, these showed part of
		// their password.
		"postgres://u:pa,ss@h:5432/db":                     "ss@",
		"host=h password='a b' user=u":                     "b'",
		"host=h password='it\\'s secret' dbname=archivist": "secret",
		"nats://a:p,q@n1:4222 nats://b:r s@n2:4222":        "r s",
	} {
		out := config.RedactSecrets(in)
		if strings.Contains(out, secret) || !strings.Contains(out, "REDACTED") {
			t.Errorf("%q redacted as %q: %q shows", in, out, secret)
		}
	}
	for in, want := range map[string]string{
		"nats://n1:4222,nats://n2:4222":                "nats://n1:4222,nats://n2:4222",
		"postgres://u:pa,ss@h:5432/db?sslmode=require": "postgres://u:REDACTED@h:5432/db?sslmode=require",
		"host=h password='a b' user=u dbname=d":        "host=h password=REDACTED user=u dbname=d",
		"nats://a:one@n1:4222,nats://n2:4222":          "nats://a:REDACTED@n1:4222,nats://n2:4222",
		"https://h/x?token=t0k&page=2":                 "https://h/x?token=REDACTED&page=2",
	} {
		if out := config.RedactSecrets(in); out != want {
			t.Errorf("%q redacted as %q, want %q", in, out, want)
		}
	}
}

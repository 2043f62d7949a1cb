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
}

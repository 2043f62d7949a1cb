// Package config loads 12-factor configuration from environment variables
// into typed structs (github.com/sethvargo/go-envconfig tags), fails fast on
// bad values, and describes a loaded configuration with secrets redacted.
package config

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"

	"github.com/sethvargo/go-envconfig"
)

// Load fills v (a pointer to a struct with env tags) from lookuper, or from
// the process environment if lookuper is nil.
func Load(ctx context.Context, v any, lookuper envconfig.Lookuper) error {
	if lookuper == nil {
		lookuper = envconfig.OsLookuper()
	}
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: v, Lookuper: lookuper}); err != nil {
		// envconfig names the Go field; an operator needs the variable.
		msg := err.Error()
		for _, x := range Vars(v) {
			if rest, ok := strings.CutPrefix(msg, x.field+": "); ok {
				return fmt.Errorf("configuration: %s: %s", x.Name, rest)
			}
		}
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// Var is one environment variable of a configuration struct.
type Var struct {
	// Name of the variable.
	Name string
	// Default value, if any.
	Default string
	// Value is the loaded value, with secrets redacted.
	Value string

	field string
}

// secretNames are variables whose values are never shown.
var secretNames = []string{"SECRET", "PASSWORD", "TOKEN", "ACCESS_KEY"}

// Vars lists the variables of a loaded configuration struct, in field
// order, with secret values (names containing SECRET, PASSWORD, TOKEN or
// ACCESS_KEY) replaced and passwords in URLs hidden.
func Vars(v any) []Var {
	var out []Var
	walk(reflect.ValueOf(v), &out)
	return out
}

func walk(rv reflect.Value, out *[]Var) {
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return
	}
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("env")
		if tag == "" {
			walk(rv.Field(i), out)
			continue
		}
		parts := strings.Split(tag, ",")
		name := strings.TrimSpace(parts[0])
		var def string
		for _, p := range parts[1:] {
			if d, ok := strings.CutPrefix(strings.TrimSpace(p), "default="); ok {
				def = d
			}
		}
		*out = append(*out, Var{Name: name, Default: def, field: f.Name, Value: redact(name, fmt.Sprint(rv.Field(i).Interface()))})
	}
}

func redact(name, value string) string {
	if value == "" {
		return ""
	}
	for _, s := range secretNames {
		if strings.Contains(name, s) {
			return "REDACTED"
		}
	}
	if u, err := url.Parse(value); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
			return u.String()
		}
	}
	if strings.Contains(value, "password=") {
		fields := strings.Fields(value)
		for i, f := range fields {
			if strings.HasPrefix(f, "password=") {
				fields[i] = "password=REDACTED"
			}
		}
		return strings.Join(fields, " ")
	}
	return value
}

// LogAttrs returns the configuration as log attributes, secrets redacted.
func LogAttrs(v any) []any {
	var attrs []any
	for _, x := range Vars(v) {
		attrs = append(attrs, slog.String(x.Name, x.Value))
	}
	return attrs
}

// Package config loads 12-factor configuration from environment variables
// into typed structs (github.com/sethvargo/go-envconfig tags), fails fast on
// bad values, and describes a loaded configuration with secrets redacted.
package config

import (
	"context"
	"fmt"
	"log/slog"
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
	walk(reflect.ValueOf(v), &out, "")
	return out
}

// walk adds rv's variables; path is the fields leading to rv, as
// envconfig names them in its errors ("Store: MaxConns").
func walk(rv reflect.Value, out *[]Var, path string) {
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
			walk(rv.Field(i), out, path+f.Name+": ")
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
		*out = append(*out, Var{Name: name, Default: def, field: path + f.Name, Value: redact(name, fmt.Sprint(rv.Field(i).Interface()))})
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
	return RedactSecrets(value)
}

// secretParams are query and DSN parameters whose values are secrets.
var secretParams = []string{"password", "passwd", "secret", "token", "key", "sslpassword"}

// RedactSecrets hides the secrets in a value that may hold URLs or a DSN:
// the password of every URL of a comma-separated list, found without
// parsing the URL (a password may hold / # @ or anything else), and the
// value of every password-like query or key=value parameter.
func RedactSecrets(value string) string {
	parts := strings.Split(value, ",")
	for i, p := range parts {
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

func redactOne(p string) string {
	if i := strings.Index(p, "://"); i >= 0 {
		rest := p[i+3:]
		// The userinfo ends at the last @ before the path's first / that
		// follows it; a password may contain / and @ itself, so the last @
		// of the whole value is taken when in doubt: hiding too much is
		// the safe side.
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				p = p[:i+3] + rest[:c+1] + "REDACTED" + rest[at:]
			}
		}
	}
	// key=value parameters, in a query string or a DSN.
	var b strings.Builder
	for len(p) > 0 {
		j := strings.IndexAny(p, "?&; ")
		if j < 0 {
			b.WriteString(redactParam(p))
			break
		}
		b.WriteString(redactParam(p[:j]))
		b.WriteByte(p[j])
		p = p[j+1:]
	}
	return b.String()
}

func redactParam(kv string) string {
	k, _, ok := strings.Cut(kv, "=")
	if !ok {
		return kv
	}
	for _, s := range secretParams {
		if strings.EqualFold(k, s) || strings.HasSuffix(strings.ToLower(k), "_"+s) {
			return k + "=REDACTED"
		}
	}
	return kv
}

// LogAttrs returns the configuration as log attributes, secrets redacted.
func LogAttrs(v any) []any {
	var attrs []any
	for _, x := range Vars(v) {
		attrs = append(attrs, slog.String(x.Name, x.Value))
	}
	return attrs
}

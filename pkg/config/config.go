// Package config loads 12-factor configuration from environment variables
// into typed structs (github.com/sethvargo/go-envconfig tags), fails fast on
// bad values, and describes a loaded configuration with secrets redacted.
package config

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
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
// the password of every URL (of a list, too), found without parsing the
// URL (a password may hold / # @ , or anything else), and the value of
// every password-like query or key=value parameter, a quoted one whole
// (password='a b'). It reads the value as a whole before it splits it: a
// comma or a space inside a password is no separator.
func RedactSecrets(value string) string {
	// Each URL runs from its scheme to the next URL's scheme (a list joined
	// by commas or spaces); its userinfo ends at the last @ within it, so a
	// password holding , / # or @ is hidden whole: hiding too much is the
	// safe side.
	var b strings.Builder
	locs := schemeAt.FindAllStringIndex(value, -1)
	prev := 0
	for i, loc := range locs {
		end := len(value)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		b.WriteString(value[prev:loc[0]])
		b.WriteString(redactUserinfo(value[loc[0]:end], loc[1]-loc[0]))
		prev = end
	}
	b.WriteString(value[prev:])
	return redactParams(b.String())
}

// schemeAt finds where a URL begins.
var schemeAt = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)

// redactUserinfo hides the password of url, whose authority starts at
// offset start.
func redactUserinfo(url string, start int) string {
	rest := url[start:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return url
	}
	c := strings.Index(rest[:at], ":")
	if c < 0 {
		return url
	}
	return url[:start] + rest[:c+1] + "REDACTED" + rest[at:]
}

// redactParams hides the value of every secret key=value parameter: one
// whose key starts the value or follows ? & ; , or white space. A value in
// single quotes (libpq's DSN) runs to its closing quote (\' escapes one);
// another to the next & ; or white space.
func redactParams(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); {
		if i > 0 && !strings.ContainsRune("?&;, \t\n", rune(p[i-1])) {
			b.WriteByte(p[i])
			i++
			continue
		}
		eq := strings.IndexByte(p[i:], '=')
		stop := strings.IndexAny(p[i:], "?&;, \t\n")
		if eq < 0 || (stop >= 0 && stop < eq) || !secretKey(p[i:i+eq]) {
			b.WriteByte(p[i])
			i++
			continue
		}
		b.WriteString(p[i:i+eq] + "=REDACTED")
		j := i + eq + 1
		if j < len(p) && p[j] == '\'' {
			for j++; j < len(p) && p[j] != '\''; j++ {
				if p[j] == '\\' {
					j++
				}
			}
			j++
		} else {
			// A comma may be a password's own: hiding too much is the safe side.
			for j < len(p) && !strings.ContainsRune("&; \t\n", rune(p[j])) {
				j++
			}
		}
		i = min(j, len(p))
	}
	return b.String()
}

// secretKey reports whether a parameter's key names a secret.
func secretKey(k string) bool {
	for _, s := range secretParams {
		if strings.EqualFold(k, s) || strings.HasSuffix(strings.ToLower(k), "_"+s) {
			return true
		}
	}
	return false
}

// LogAttrs returns the configuration as log attributes, secrets redacted.
func LogAttrs(v any) []any {
	var attrs []any
	for _, x := range Vars(v) {
		attrs = append(attrs, slog.String(x.Name, x.Value))
	}
	return attrs
}

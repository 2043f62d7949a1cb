// Package keycmd is `archivist key`, `archivist nats-auth` and `archivist
// secrets`: it issues API keys and the NATS users of curating systems,
// renders the NATS server's users, and makes the Secrets of a first
// install.
package keycmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/pkg/apiauth"
)

// NewKey is `archivist key new NAME --role ROLES`: an API key and its
// keys-file line, printed once (the file keeps only its hash).
func NewKey(name, roles, source, collections, arks string, stdout io.Writer) error {
	cs, err := apiauth.ParseCollections("--collections", collections)
	if err != nil {
		return err
	}
	as, err := apiauth.ParseARKShoulders("--arks", arks)
	if err != nil {
		return err
	}
	var rs []apiauth.Role
	for _, r := range strings.Split(roles, ",") {
		rs = append(rs, apiauth.Role(strings.TrimSpace(r)))
	}
	key, line := apiauth.NewKeyFor(apiauth.Identity{Name: name, Roles: rs, Source: source, Collections: cs, ARKs: as})
	if _, err := apiauth.ParseKeys(line); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key (give it to %s; it is not kept):\n  %s\nline for API_KEYS_FILE:\n  %s\n", name, key, line)
	return nil
}

// Token is `archivist key token DIR`: the local operator's key Init made.
func Token(dir string, stdout io.Writer) error {
	b, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		return fmt.Errorf("the token of %s: %w (archivist key init makes it)", dir, err)
	}
	_, err = stdout.Write(b)
	return err
}

// The files Init makes.
const (
	// KeysFile is the keys file (API_KEYS_FILE): hashes only.
	KeysFile = "api-keys"
	// TokenFile is the local operator's key itself, readable by its owner.
	TokenFile = "api.token"
)

// Init makes, on a system's first start, the keys file of dir with one key
// for the local operator (operator and publisher, source http, every
// collection) and writes the key to dir's token file: no system starts
// with a key anyone else has (compose used to ship a committed one). A
// dir that has its keys keeps them.
//
// The token goes to tokenDir ("": dir): where the services mount the keys
// file, the key itself need not be (compose keeps it in a volume of its
// own, mounted only by what runs the CLI). A token an earlier Init left in
// dir moves there.
func Init(dir, tokenDir string, stdout io.Writer) error {
	if tokenDir == "" {
		tokenDir = dir
	}
	keys := filepath.Join(dir, KeysFile)
	if _, err := os.Stat(keys); err == nil {
		fmt.Fprintf(stdout, "%s exists: its keys stay\n", keys)
		return moveToken(dir, tokenDir, stdout)
	}
	key, line := apiauth.NewKeyFor(apiauth.Identity{Name: "local-operator", Roles: []apiauth.Role{apiauth.Operator, apiauth.Publisher}, Source: "http",
		Collections: []string{apiauth.AnyCollection}, ARKs: []string{apiauth.AnyCollection}})
	if err := os.WriteFile(filepath.Join(tokenDir, TokenFile), []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("the token: %w", err)
	}
	text := "# API keys of this system: NAME ROLES SHA256-OF-KEY [source=SOURCE] [collections=C,...] [arks=A,...]\n" +
		"# local-operator's key was made at its first start (archivist key token shows it).\n" + line + "\n"
	// Written whole under another name, then renamed: a reader never sees
	// half a file.
	tmp := keys + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return fmt.Errorf("the keys file: %w", err)
	}
	if err := os.Rename(tmp, keys); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "made %s with the key of local-operator (archivist key token %s shows it)\n", keys, tokenDir)
	return nil
}

// moveToken moves a token from dir to tokenDir (nothing when they are one
// or dir has none).
func moveToken(dir, tokenDir string, stdout io.Writer) error {
	from, to := filepath.Join(dir, TokenFile), filepath.Join(tokenDir, TokenFile)
	if filepath.Clean(dir) == filepath.Clean(tokenDir) {
		return nil
	}
	b, err := os.ReadFile(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the token: %w", err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		return fmt.Errorf("the token: %w", err)
	}
	if err := os.Remove(from); err != nil {
		return fmt.Errorf("the token: %w", err)
	}
	fmt.Fprintf(stdout, "moved the local operator's key from %s to %s\n", dir, tokenDir)
	return nil
}

// NATSUser is `archivist key new NAME --nats --source SOURCE`: a curating
// system's NATS password and its publishers-file line, printed once.
func NATSUser(name, source string, stdout io.Writer) error {
	password, line, err := NewPublisher(name, source)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "NATS user %s, password (give it to %s; it is not kept):\n  %s\n", name, name, password)
	fmt.Fprintf(stdout, "line for charts/archivist-nats/files/publishers (then archivist nats-auth, and apply):\n  %s\n", line)
	fmt.Fprintf(stdout, "it publishes on %s and %s with inbox prefix %s, and reads its rejections on %s\n",
		events.CurationSubject(source, events.TypeEpisodeUpserted), events.CurationSubject(source, events.TypeClipUpserted),
		events.InboxPrefix(name), events.RejectedSubject(source))
	return nil
}

// BcryptCost is the cost of the publishers' password hashes: the NATS
// server pays it at every sign-in (tests under -race lower it; the server
// takes any cost).
var BcryptCost = 11

// NewPublisher makes a random NATS password for the curating system name,
// publishing as source, and its publishers-file line (its bcrypt hash).
func NewPublisher(name, source string) (password, line string, err error) {
	password, err = newPassword()
	if err != nil {
		return "", "", err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), BcryptCost)
	if err != nil {
		return "", "", err
	}
	line = fmt.Sprintf("%s %s %s", name, source, hash)
	if _, err := events.ParsePublishers(line); err != nil {
		return "", "", err
	}
	return password, line, nil
}

// NATSAuth is `archivist nats-auth [--publishers FILE]`: the NATS server's
// users (charts/archivist-nats/files/auth.conf): every service's, and those of the publishers
// file (none if "").
func NATSAuth(file string, stdout io.Writer) error {
	var pubs []events.Publisher
	if file != "" {
		text, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if pubs, err = events.ParsePublishers(string(text)); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	conf, err := events.AuthConfig(pubs)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, conf)
	return err
}

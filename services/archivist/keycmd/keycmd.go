// Package keycmd is `archivist key`: it issues API keys.
package keycmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/archivist/archivist/pkg/service"
)

// Run is `archivist key new`: an API key and its keys-file line, printed
// once (the file keeps only the key's hash).
func Run(args []string, stdout, stderr io.Writer) error {
	usage := errors.New("usage: archivist key new NAME --role reader|publisher|operator[,...] [--source SOURCE] [--collections C[,C...]|*]")
	if len(args) < 2 || args[0] != "new" {
		return usage
	}
	fs := flag.NewFlagSet("key new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	roles := fs.String("role", "", "the key's roles, comma-separated: reader, publisher, operator")
	source := fs.String("source", "", "a publisher's source: the records it posts carry it")
	collections := fs.String("collections", "", "the collections (ingest profiles) a publisher deposits batches into, comma-separated; * for every one")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	cs, err := service.ParseCollections("--collections", *collections)
	if err != nil {
		return fmt.Errorf("%w\n%v", err, usage)
	}
	var rs []service.Role
	for _, r := range strings.Split(*roles, ",") {
		rs = append(rs, service.Role(strings.TrimSpace(r)))
	}
	key, line := service.NewKey(args[1], rs, *source, cs...)
	if _, err := service.ParseKeys(line); err != nil {
		return fmt.Errorf("%w\n%v", err, usage)
	}
	fmt.Fprintf(stdout, "key (give it to %s; it is not kept):\n  %s\nline for API_KEYS_FILE:\n  %s\n", args[1], key, line)
	return nil
}

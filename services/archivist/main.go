// Command archivist is the operator's tool: `archivist dev` runs the whole
// system in one process, `archivist migrate` migrates every schema, and
// the other commands submit work, follow it and act on it (package cli).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/archivist/archivist/services/archivist/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "archivist:", err)
	}
	os.Exit(cli.ExitCode(err))
}

// run runs the command line args.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, stdout, stderr)
}

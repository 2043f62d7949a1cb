// Package cli is the archivist command line: its commands, their flags,
// help and shell completion (github.com/spf13/cobra), over the packages
// that do the work (batchcmd, auditcmd, indexcmd, researchcmd, works,
// locatecmd, keycmd, dev). Every argument is checked before a command
// reads its configuration or connects anywhere.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/pkg/service"
)

// UsageError is a command line that cannot run: an unknown command or
// flag, a missing or malformed argument. The command exits with status 2.
type UsageError struct{ Err error }

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *UsageError) Unwrap() error { return e.Err }

// IsUsage tells whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

func usagef(format string, args ...any) error { return &UsageError{fmt.Errorf(format, args...)} }

// ExitCode is the process's exit status after err: 0 done (help
// included), 2 a wrong usage, 1 any other error.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case IsUsage(err):
		return 2
	}
	return 1
}

// Run runs the command line args (without the program's name), writing
// to stdout and stderr. A wrong usage is a *UsageError, after the failing
// command's usage line on stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot(ctx)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(os.Stdin)
	// Whatever fails before a command's run starts (an unknown command or
	// flag, the wrong arguments, a required flag missing) is a wrong usage.
	started := false
	var mark func(c *cobra.Command)
	mark = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(c *cobra.Command, args []string) error { started = true; return run(c, args) }
		}
		for _, sub := range c.Commands() {
			mark(sub)
		}
	}
	mark(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && (!started || IsUsage(err)) {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(stderr, "usage: %s\nRun '%s --help' for more.\n", cmd.UseLine(), cmd.CommandPath())
		if !IsUsage(err) {
			err = &UsageError{err}
		}
	}
	return err
}

func newRoot(ctx context.Context) *cobra.Command {
	root := &cobra.Command{
		Use:   "archivist",
		Short: "Run, feed and look after an Archivist system",
		Long: `archivist is the operator's tool: 'archivist dev' runs the whole system in
one process, 'archivist migrate' migrates every schema, and the other
commands submit work, follow it and act on it through the services' APIs.

Exit status: 0 done (and for --help), 1 an error, 2 a wrong usage.`,
		Version:       service.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("archivist {{.Version}}\n")
	root.AddGroup(&cobra.Group{ID: "run", Title: "Running a system:"},
		&cobra.Group{ID: "work", Title: "Following and acting on the work:"},
		&cobra.Group{ID: "tools", Title: "Tools:"})
	for _, c := range []*cobra.Command{devCmd(ctx), migrateCmd(), keyCmd(), natsAuthCmd(), secretsCmd(), blobCmd()} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{batchCmd(), jobCmd(), collectionCmd(), ingestCmd(), profileCmd(), objectCmd(), researchCmd(), worksCmd(), auditCmd(), indexCmd(), workCmd()} {
		c.GroupID = "work"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{cdxCmd(), locateCmd(), probeCmd(), versionCmd()} {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &UsageError{err} })
	for _, c := range root.Commands() {
		if c.HasSubCommands() && c.RunE == nil {
			c.RunE = group
		}
	}
	return root
}

// group is the run of a command that only groups others: alone it prints
// its help; with an argument, that is no command of it.
func group(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], c.CommandPath())
	}
	return c.Help()
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), "archivist", service.Version)
			return err
		},
	}
}

// envOr is the variable's value, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// safeOut is the command's standard output for what others wrote (titles,
// errors, dead letters): no control character gets through.
func safeOut(c *cobra.Command) io.Writer { return &printable{w: c.OutOrStdout()} }

// show prints a view read with err: as JSON, or for a person.
func show[T any](w io.Writer, v T, err error, asJSON bool, print func(io.Writer, T) error) error {
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, v)
	}
	return print(w, v)
}

// printJSON writes v as indented JSON: the --json form of every view.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonFlag adds --json to a read command.
func jsonFlag(c *cobra.Command) *bool {
	return c.Flags().Bool("json", false, "print JSON")
}

// oneID is an Args check: exactly one positive number, named what.
func oneID(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("takes one %s", what)
		}
		if n, err := strconv.ParseInt(args[0], 10, 64); err != nil || n <= 0 {
			return usagef("%q is not a %s (a positive number)", args[0], what)
		}
		return nil
	}
}

// id is the argument oneID checked.
func id(args []string) int64 {
	n, _ := strconv.ParseInt(args[0], 10, 64)
	return n
}

// exactly is an Args check: n arguments, named in what.
func exactly(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("takes %s", what)
		}
		return nil
	}
}

// env is the help's list of the environment variables a command reads.
func env(lines ...string) string {
	s := "\n\nEnvironment:"
	for _, l := range lines {
		s += "\n  " + l
	}
	return s
}

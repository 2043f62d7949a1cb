package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/services/archivist/keycmd"
)

func keyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "key",
		Short: "Make API keys and the NATS users of curating systems",
		Long: `Make API keys and the NATS users of curating systems. A key is printed once;
the files keep only hashes. Delete a key's line to revoke it.`,
	}
	var roles, source, collections, arks string
	var nats bool
	newCmd := &cobra.Command{
		Use:   "new NAME (--role ROLE[,ROLE] [--source SOURCE] [--collections C,...] [--arks A,...] | --nats --source SOURCE)",
		Short: "Make an API key, or with --nats a curating system's NATS user",
		Long: `Make an API key: print the key (give it to its holder) and the line to add to
API_KEYS_FILE. With --nats, make a curating system's NATS user instead: its
password and the line to add to charts/archivist-nats/files/publishers. The CLI presents
ARCHIVIST_TOKEN, or .archivist/api.token.`,
		Args: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) != 1:
				return usagef("takes one NAME")
			case nats && source == "":
				return usagef("--nats needs --source")
			case !nats && roles == "":
				return usagef("needs --role (reader, publisher, operator) or --nats")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if nats {
				return keycmd.NATSUser(args[0], source, c.OutOrStdout())
			}
			return keycmd.NewKey(args[0], roles, source, collections, arks, c.OutOrStdout())
		},
	}
	f := newCmd.Flags()
	f.StringVar(&roles, "role", "", "the key's roles, comma-separated: reader, publisher, operator")
	f.StringVar(&source, "source", "", "a publisher's source: the records it posts carry it")
	f.StringVar(&collections, "collections", "", "the collections (ingest profiles) a publisher deposits batches into, comma-separated; * for every one")
	f.StringVar(&arks, "arks", "", "the ARK shoulders or NAANs (ark:/12345, ark:/12345/x9) under which a publisher may supply the ARKs of new objects, comma-separated; * for any NAAN but the archive's own shoulder")
	f.BoolVar(&nats, "nats", false, "a NATS user for a curating system instead: publishes only its source's curation events, reads only its rejections")
	initCmd := &cobra.Command{
		Use:   "init DIR [TOKEN_DIR]",
		Short: "Make DIR's keys file with a key for the local operator, unless it has one; the key goes to TOKEN_DIR (default DIR)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			token := ""
			if len(args) == 2 {
				token = args[1]
			}
			return keycmd.Init(args[0], token, c.OutOrStdout())
		},
	}
	tokenCmd := &cobra.Command{
		Use:   "token DIR",
		Short: "Print the local operator's key that init made",
		Args:  exactly(1, "one DIR"),
		RunE:  func(c *cobra.Command, args []string) error { return keycmd.Token(args[0], c.OutOrStdout()) },
	}
	c.AddCommand(newCmd, initCmd, tokenCmd)
	return c
}

func secretsCmd() *cobra.Command {
	var o keycmd.SecretsOptions
	var only string
	c := &cobra.Command{
		Use:   "secrets --namespace NS --nats-namespace NS [--operator NAME] [--only SECRET,...]",
		Short: "Print the Secrets of a first install, with new passwords, for kubectl create",
		Long: `Print the Secrets a Kubernetes install needs (docs/DEPLOY.md, step 3), with new
random passwords, as a List for kubectl create (never apply: an existing
Secret stays and is named in the error):

  archivist secrets --namespace archivist --nats-namespace nats --operator ops > secrets.json
  kubectl create -f secrets.json && rm secrets.json

nats-<user> (key password) for each NATS user, in both namespaces;
archivist-db-<service> (basic-auth) for each database role; with
--operator, archivist-api-keys with that operator's key, printed once on
standard error. --only prints new values for the Secrets it names alone:
the rotation of docs/RUNBOOK.md.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Namespace == "" || o.NATSNamespace == "" {
				return usagef("needs --namespace and --nats-namespace")
			}
			if only != "" {
				o.Only = strings.Split(only, ",")
			}
			return keycmd.Secrets(o, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.StringVar(&o.Namespace, "namespace", "", "the Archivist release's namespace")
	f.StringVar(&o.NATSNamespace, "nats-namespace", "", "the NATS side's namespace (charts/archivist-nats)")
	f.StringVar(&o.Operator, "operator", "", "make archivist-api-keys with an operator key of this name")
	f.StringVar(&only, "only", "", "only these Secrets, comma-separated (a rotation)")
	return c
}

func natsAuthCmd() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "nats-auth [--publishers FILE]",
		Short: "Print the NATS server's users (charts/archivist-nats/files/auth.conf)",
		Long:  "Print the NATS server's users (charts/archivist-nats/files/auth.conf): every service's and every curating system's of the publishers file.",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return keycmd.NATSAuth(file, c.OutOrStdout()) },
	}
	c.Flags().StringVar(&file, "publishers", "", "the publishers file (charts/archivist-nats/files/publishers): a line NAME SOURCE BCRYPT-HASH per curating system")
	return c
}

func blobCmd() *cobra.Command {
	c := &cobra.Command{Use: "blob", Short: "Put files into the blob store"}
	c.AddCommand(&cobra.Command{
		Use:   "put KEY [FILE]",
		Short: "Store FILE (or standard input) under KEY, with its sha256 stated",
		Long: `Store FILE (or standard input) in the blob store (BLOB_URL) under KEY, with
its sha256 stated: a WARC into the indexers' repository, audio for a
record's media.` + env("BLOB_URL and the other BLOB_* variables (README)"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("takes KEY and an optional FILE")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return blobPut(c.Context(), args, c.InOrStdin(), c.OutOrStdout())
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "bucket URL...",
		Short: "Make each s3:// URL's bucket unless it exists (compose on MinIO at its first start)",
		Long: `Make the bucket of each s3:// URL (BLOB_URL's form) unless it exists, with the
credentials of S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY.` + env("S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY"),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("takes one or more s3:// URLs")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			for _, u := range args {
				cfg := blob.Config{URL: u, S3AccessKeyID: os.Getenv("S3_ACCESS_KEY_ID"), S3SecretAccessKey: os.Getenv("S3_SECRET_ACCESS_KEY")}
				if err := blob.MakeBucket(c.Context(), cfg); err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "bucket of %s: there\n", u)
			}
			return nil
		},
	})
	return c
}

// blobPut reads the file (or in) once to state its sha256, then stores
// it under the key in BLOB_URL's store.
func blobPut(ctx context.Context, args []string, in io.Reader, stdout io.Writer) error {
	var cfg blob.Config
	if err := config.Load(ctx, &cfg, nil); err != nil {
		return err
	}
	src := in
	if len(args) == 2 {
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	tmp, err := os.CreateTemp("", "archivist-blob-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		return fmt.Errorf("read %s: %w", args[0], err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	st, err := blob.Open(ctx, cfg)
	if err != nil {
		return err
	}
	info, err := st.Put(ctx, args[0], tmp, map[string]string{blob.PropSHA256: hex.EncodeToString(h.Sum(nil))})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %d %s\n", info.Key, info.Size, info.Checksum)
	return nil
}

// connect opens the bus as the CLI.
func connect(c *cobra.Command) (*bus.Bus, error) {
	b, _, err := connectAs(c)
	return b, err
}

// connectAs opens the bus as the CLI and says who it acts as: the NATS
// user, else the machine's user (a credentials file names no one here).
func connectAs(c *cobra.Command) (*bus.Bus, string, error) {
	var cfg bus.Config
	if err := config.Load(c.Context(), &cfg, nil); err != nil {
		return nil, "", err
	}
	log, err := logging.FromEnv(c.Context(), c.ErrOrStderr())
	if err != nil {
		return nil, "", err
	}
	actor := "nats:" + cfg.User
	if cfg.User == "" {
		actor = "cli"
		if u, err := user.Current(); err == nil {
			actor = "cli:" + u.Username
		}
	}
	b, err := bus.Connect(c.Context(), cfg, "archivist-cli", bus.WithLogger(log))
	return b, actor, err
}

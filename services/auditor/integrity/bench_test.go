package integrity_test

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/services/auditor/integrity"
	"github.com/archivist/archivist/services/auditor/migrations"
)

// BenchmarkChecksum1GB compares, in one run on the same 1 GiB object, the
// auditor's full observation (stat, stream from the local blob store,
// sha256, index and log lookups) with coreutils' sha256sum of the file.
// docs/PERFORMANCE.md has figures.
func BenchmarkChecksum1GB(b *testing.B) {
	const size = 1 << 30
	store, err := blob.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := store.Put(ctx, "big", io.LimitReader(rand.Reader, size), nil); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(store.Root(), "big")
	if _, err := exec.LookPath("sha256sum"); err != nil {
		b.Fatal("sha256sum not found: it is the peer this benchmark compares with")
	}
	chk := integrity.New(testenv.DB(b, migrations.Schema), store, nil)
	b.Run("sha256sum", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			cmd := exec.Command("sha256sum", path)
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("auditor", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			obs, err := chk.Observe(ctx, "big", false)
			if err != nil || obs.Content.State != integrity.OK {
				b.Fatalf("%+v %v", obs, err)
			}
		}
	})
}

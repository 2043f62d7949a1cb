package cdxindex_test

import (
	"testing"

	"github.com/archivist/archivist/devkit/testenv"
)

// TestMain stops the servers the tests started (the S3 benchmark's MinIO).
func TestMain(m *testing.M) { testenv.Main(m) }

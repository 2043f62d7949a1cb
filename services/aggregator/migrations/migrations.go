// Package migrations holds the aggregator schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
)

//go:embed *.sql
var files embed.FS

// Schema is the aggregator's PostgreSQL schema.
var Schema = store.Schema{Name: "aggregator", Migrations: files}

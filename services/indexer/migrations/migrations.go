// Package migrations holds the indexer schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
)

//go:embed *.sql
var files embed.FS

// Schema is the indexer's PostgreSQL schema.
var Schema = store.Schema{Name: "indexer", Migrations: files}

// Package migrations holds the indexer schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
)

//go:embed *.sql
var files embed.FS

// Schema is the indexer's PostgreSQL schema.
var Schema = store.Schema{Name: "indexer", Migrations: files}

// Schemas are the schema and the work kit's part of it (its action log):
// what the indexer migrates.
var Schemas = []store.Schema{Schema, work.Schema(Schema.Name)}

// Package migrations holds the research schema's SQL migrations, shared by
// the pwa and the cwa (two deployables of one context).
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
)

//go:embed *.sql
var files embed.FS

// Schema is the research context's PostgreSQL schema.
var Schema = store.Schema{Name: "research", Migrations: files}

// Schemas are the schema and the work kit's part of it (its action log):
// what a service owning the schema migrates.
var Schemas = []store.Schema{Schema, work.Schema(Schema.Name)}

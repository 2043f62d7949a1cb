// Package migrations holds the curator schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
)

//go:embed *.sql
var files embed.FS

// Schema is the curator's PostgreSQL schema.
var Schema = store.Schema{Name: "curator", Migrations: files}

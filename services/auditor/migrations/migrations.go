// Package migrations holds the auditor schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
)

//go:embed *.sql
var files embed.FS

// Schema is the auditor's PostgreSQL schema.
var Schema = store.Schema{Name: "auditor", Migrations: files}

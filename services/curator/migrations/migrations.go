// Package migrations holds the curator schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
)

//go:embed *.sql
var files embed.FS

// Schema is the curator's PostgreSQL schema, with the work kit's part (its action log).
var Schema = store.Schema{Name: "curator", Migrations: files, Parts: []store.Schema{work.Schema("curator")}}

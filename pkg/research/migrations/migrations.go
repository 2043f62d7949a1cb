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

// Schema is the research context's PostgreSQL schema, with the work kit's part (its action log).
var Schema = store.Schema{Name: "research", Migrations: files, Parts: []store.Schema{work.Schema("research")}}

// Package migrations holds the indexer schema's SQL migrations.
package migrations

import (
	"embed"

	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/pkg/work"
)

//go:embed *.sql
var files embed.FS

// Schema is the indexer's PostgreSQL schema, with the work kit's part (its action log).
var Schema = store.Schema{Name: "indexer", Migrations: files, Parts: []store.Schema{work.Schema("indexer")}}

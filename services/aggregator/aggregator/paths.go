package aggregator

import (
	"bufio"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/reply"
)

// pathRoutes serves the path index a Wayback resolves CDX lines' file
// names through: GET /v1/index/paths, every indexed archive file as
// "NAME<tab>LOCATION" lines sorted by name (pywb's path index format,
// streamed), and GET /v1/index/paths/{name...}, one file as JSON (the
// name is events.CDXFileName of its key, slashes and all). A withdrawn
// file is in neither.
func (a *Aggregator) pathRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/index/paths", func(w http.ResponseWriter, r *http.Request) {
		rows, err := a.db.Query(r.Context(), `SELECT name, file FROM aggregator.outputs WHERE NOT withdrawn ORDER BY name, file`)
		if err != nil {
			a.log.Error("path index", "err", err)
			http.Error(w, "reading the path index failed", http.StatusInternalServerError)
			return
		}
		defer rows.Close()
		w.Header().Set("Content-Type", "text/plain")
		bw := bufio.NewWriterSize(w, 64<<10)
		for rows.Next() {
			var name, file string
			if err := rows.Scan(&name, &file); err != nil {
				break
			}
			bw.WriteString(name + "\t" + blob.Location(a.blob, file) + "\n")
		}
		if err := rows.Err(); err != nil {
			// The status is sent: an incomplete index must not look whole.
			a.log.Error("path index cut short", "err", err)
			panic(http.ErrAbortHandler)
		}
		bw.Flush()
	})
	mux.HandleFunc("GET /v1/index/paths/{name...}", func(w http.ResponseWriter, r *http.Request) {
		var file string
		err := a.db.QueryRow(r.Context(), `SELECT file FROM aggregator.outputs WHERE name = $1 AND NOT withdrawn ORDER BY file LIMIT 1`, r.PathValue("name")).Scan(&file)
		if errors.Is(err, pgx.ErrNoRows) {
			reply.JSON(w, http.StatusNotFound, map[string]string{"error": "no indexed archive file of that name", "name": r.PathValue("name")})
			return
		}
		if err != nil {
			a.log.Error("path index", "name", r.PathValue("name"), "err", err)
			reply.JSON(w, http.StatusInternalServerError, map[string]string{"error": "reading the path index failed"})
			return
		}
		reply.JSON(w, http.StatusOK, map[string]string{"name": r.PathValue("name"), "file": file, "location": blob.Location(a.blob, file)})
	})
}

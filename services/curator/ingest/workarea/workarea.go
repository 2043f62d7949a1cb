// Package workarea is ingest's working area: a directory per job that
// holds its payload from downloading to storing, and the tidying that
// removes the directories no job needs any more.
package workarea

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Area is the working area at Dir (INGEST_WORK_DIR).
type Area struct {
	Dir string
	DB  *pgxpool.Pool
	Log *slog.Logger
}

// activeDirStates are the job states whose working directory holds what
// the job still needs: the payload being downloaded, processed or stored.
var activeDirStates = []ingest.State{ingest.Downloading, ingest.Processing, ingest.Storing}

// Tidy removes the working directory of every job that needs none any
// more: ended (completed, failed or deleted), past storing, or gone from
// the table. A failed job whose requeue would have needed the payload
// (after downloading or processing) is set to restart from downloading, so
// a requeue fetches it again. The cost is the working area's directories
// (the jobs in flight), not the archive's jobs. It returns how many
// directories it removed.
func (a *Area) Tidy(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", a.Dir, err)
	}
	var ids []int64
	for _, e := range entries {
		var id int64
		if _, err := fmt.Sscanf(e.Name(), "job-%d", &id); err == nil && e.Name() == fmt.Sprintf("job-%d", id) {
			ids = append(ids, id)
		}
	}
	removed := 0
	for chunk := range slices.Chunk(ids, 1000) {
		rows, err := a.DB.Query(ctx, `WITH idle AS (
				SELECT id FROM unnest($1::bigint[]) AS id
				EXCEPT SELECT id FROM curator.jobs WHERE id = ANY($1) AND state = ANY($2)),
			restart AS (UPDATE curator.jobs SET last_successful = 'provisioning'
				WHERE id IN (SELECT id FROM idle) AND state = 'failed' AND last_successful IN ('downloading', 'processing'))
			SELECT id FROM idle`, chunk, activeDirStates)
		if err != nil {
			return removed, err
		}
		idle, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return removed, err
		}
		for _, id := range idle {
			if err := os.RemoveAll(a.JobDir(id)); err != nil {
				a.Log.Warn("ingest: remove a working directory", "job", id, "err", err)
				continue
			}
			removed++
		}
	}
	return removed, nil
}

// JobDir is job id's directory.
func (a *Area) JobDir(id int64) string {
	return filepath.Join(a.Dir, fmt.Sprintf("job-%d", id))
}

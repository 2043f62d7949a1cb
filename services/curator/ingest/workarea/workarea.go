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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/archivist/archivist/services/curator/ingest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Area is the working area at Dir (INGEST_WORK_DIR), which keeps MinFree
// bytes free (INGEST_MIN_FREE_BYTES).
type Area struct {
	Dir     string
	MinFree int64
	DB      *pgxpool.Pool
	Log     *slog.Logger

	// resv is provisioning's view of the reserved bytes: the sum of the
	// space needed by jobs downloading and processing, read at most every
	// reservationTTL, plus what this process let through since.
	resv struct {
		mu  sync.Mutex
		at  time.Time
		sum int64
	}
	// tidying is set while a tidy asked for by provisioning runs.
	tidying atomic.Bool
}

// reservationTTL is how long provisioning trusts the reserved bytes
// before reading them again, adding what it lets through meanwhile:
// reading them for every job was a statement of 0.5-0.7 ms per job over a
// busy table.
const reservationTTL = 200 * time.Millisecond

// free is the free space of the area's file system.
func (a *Area) free() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(a.Dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", a.Dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Admit tells whether job id, needing needed bytes, may start downloading:
// whether the area keeps MinFree bytes after it and the jobs downloading
// or processing. Admitted, its bytes count as reserved at once; not, a
// tidy is started (one at a time) to make room.
func (a *Area) Admit(ctx context.Context, id, needed int64) (bool, error) {
	free, err := a.free()
	if err != nil {
		return false, err
	}
	a.resv.mu.Lock()
	defer a.resv.mu.Unlock()
	if time.Since(a.resv.at) >= reservationTTL {
		if a.resv.sum, err = ingest.ReservedSpace(ctx, a.DB, 0); err != nil {
			return false, err
		}
		a.resv.at = time.Now()
	}
	if free-a.resv.sum-needed < a.MinFree {
		a.Log.InfoContext(ctx, "ingest: waiting for room in the working area", "job", id, "free", free, "reserved", a.resv.sum, "needed", needed)
		if a.tidying.CompareAndSwap(false, true) {
			go func() {
				defer a.tidying.Store(false)
				if n, err := a.Tidy(context.WithoutCancel(ctx)); err != nil {
					a.Log.WarnContext(ctx, "ingest: tidy the working area", "err", err)
				} else if n > 0 {
					a.Log.InfoContext(ctx, "ingest: working directories removed to make room", "jobs", n)
				}
			}()
		}
		return false, nil
	}
	a.resv.sum += needed
	return true, nil
}

// ReserveContent reserves room for a container's content (total bytes)
// before job id (which needed bytes so far) extracts it: its space_needed
// grows by total, unless the area would then keep less than MinFree
// beyond what other jobs reserved (false: the job waits).
func (a *Area) ReserveContent(ctx context.Context, id, needed, total int64) (bool, error) {
	free, err := a.free()
	if err != nil {
		return false, err
	}
	a.resv.mu.Lock()
	defer a.resv.mu.Unlock()
	others, err := ingest.ReservedSpace(ctx, a.DB, id)
	if err != nil {
		return false, err
	}
	if free-others-total < a.MinFree {
		a.Log.InfoContext(ctx, "ingest: waiting for room to extract a container", "job", id, "free", free, "reserved", others, "needed", total)
		return false, nil
	}
	if err := ingest.SetSpaceNeeded(ctx, a.DB, id, needed+total); err != nil {
		return false, err
	}
	a.resv.sum += total
	return true, nil
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
		idle, err := ingest.IdleJobs(ctx, a.DB, chunk, activeDirStates)
		if err != nil {
			return removed, err
		}
		for _, id := range idle {
			if err := os.RemoveAll(a.JobDir(id)); err != nil {
				a.Log.WarnContext(ctx, "ingest: remove a working directory", "job", id, "err", err)
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

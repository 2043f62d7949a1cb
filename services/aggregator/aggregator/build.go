package aggregator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/services/aggregator/cdxindex"
)

// pendingGrace is how long a cluster's files, uploaded but not yet swapped
// in, are kept: a build that crashed between the two leaves nothing behind
// for longer.
const pendingGrace = "1 day"

// MergeNew builds the outputs not yet in a cluster into level-0 clusters
// (AGGREGATOR_BUILD_OUTPUTS at a time), then merges every level holding
// AGGREGATOR_LEVEL_FACTOR clusters into the next, until neither has work.
// A re-indexed file's new output goes into a new build; its old lines are
// masked (see Ready) and left out when their cluster next merges.
func (a *Aggregator) MergeNew(ctx context.Context) error {
	for {
		built, err := a.buildNew(ctx)
		if err != nil {
			return err
		}
		if built {
			continue
		}
		merged, err := a.compact(ctx)
		if err != nil || !merged {
			return err
		}
	}
}

// clusterRow is a cluster as the database records it.
type clusterRow struct {
	ID       int64
	Level    int
	Name     string
	Parts    int
	Lo, Hi   int64
	Lines    int64
	Blocks   int64
	Bytes    int64
	Sources  int64
	FirstKey string
	LastKey  string
}

// files are the blob keys of a cluster's files.
func (a *Aggregator) files(name string, parts int) []string {
	dir := a.cfg.Prefix + name + "/"
	out := []string{dir + name + ".idx", dir + name + ".loc"}
	for i := range parts {
		out = append(out, fmt.Sprintf("%s%s-%05d.cdx.gz", dir, name, i))
	}
	return out
}

// buildNew merges up to AGGREGATOR_BUILD_OUTPUTS outputs not yet built
// into a new level-0 cluster; false when there were none.
func (a *Aggregator) buildNew(ctx context.Context) (bool, error) {
	limit := a.cfg.BuildOutputs
	if limit <= 0 {
		limit = 4096
	}
	rows, err := a.db.Query(ctx, `SELECT file, output, name FROM aggregator.outputs WHERE build IS NULL AND NOT withdrawn ORDER BY file LIMIT $1`, limit)
	if err != nil {
		return false, fmt.Errorf("list new outputs: %w", err)
	}
	// names are what the outputs' lines call their files.
	var files, outputs, names []string
	for rows.Next() {
		var f, o, n string
		if err := rows.Scan(&f, &o, &n); err != nil {
			rows.Close()
			return false, err
		}
		files, outputs, names = append(files, f), append(outputs, o), append(names, n)
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("list new outputs: %w", err)
	}
	if len(files) == 0 {
		return false, nil
	}
	var b int64
	if err := a.db.QueryRow(ctx, `SELECT nextval('aggregator.builds')`).Scan(&b); err != nil {
		return false, err
	}
	c := clusterRow{Level: 0, Name: fmt.Sprintf("L0-%d", b), Lo: b, Hi: b, Sources: int64(len(files))}
	err = a.writeCluster(ctx, &c, len(files), func(i int) (io.ReadCloser, error) {
		rc, _, err := a.blob.Get(ctx, outputs[i])
		if err != nil {
			return nil, fmt.Errorf("read output %s: %w", outputs[i], err)
		}
		return rc, nil
	})
	if err != nil {
		return false, fmt.Errorf("build %d (%d outputs): %w", b, len(files), err)
	}
	err = a.swapIn(ctx, c, func(tx pgx.Tx) error {
		// The outputs still current are in this build now; one replaced
		// or withdrawn while it ran has its lines here masked.
		_, err := tx.Exec(ctx, `WITH l AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS l(file, output, name)),
			u AS (UPDATE aggregator.outputs o SET build = $1 FROM l
				WHERE o.file = l.file AND o.output = l.output AND o.build IS NULL AND NOT o.withdrawn RETURNING o.file)
			INSERT INTO aggregator.masks (name, build, file) SELECT l.name, $1, l.file FROM l WHERE l.file NOT IN (SELECT file FROM u)
			ON CONFLICT DO NOTHING`, b, files, outputs, names)
		return err
	})
	if err != nil {
		return false, err
	}
	a.log.InfoContext(ctx, "cluster built", "cluster", c.Name, "level", 0, "build", b, "outputs", len(files), "lines", c.Lines, "blocks", c.Blocks)
	return true, nil
}

// compact merges the oldest AGGREGATOR_LEVEL_FACTOR clusters of the
// lowest level holding that many into one cluster of the next level,
// leaving out the lines masked in their builds; false when no level is
// full.
func (a *Aggregator) compact(ctx context.Context) (bool, error) {
	factor := max(a.cfg.LevelFactor, 2)
	rows, err := a.db.Query(ctx, `SELECT id, level, name, parts, lo, hi, lines, blocks, bytes, sources, first_key, last_key
		FROM aggregator.clusters WHERE level = (SELECT level FROM aggregator.clusters GROUP BY level HAVING count(*) >= $1 ORDER BY level LIMIT 1)
		ORDER BY lo LIMIT $1`, factor)
	if err != nil {
		return false, fmt.Errorf("find a full level: %w", err)
	}
	inputs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[clusterRow])
	if err != nil {
		return false, fmt.Errorf("find a full level: %w", err)
	}
	if len(inputs) < factor {
		return false, nil
	}
	lo, hi := inputs[0].Lo, inputs[len(inputs)-1].Hi
	// The masks of the inputs' builds, read once: the lines they name are
	// left out, and they are dropped with the swap (a mask made while the
	// merge runs stays, and applies to the new cluster).
	rows, err = a.db.Query(ctx, `SELECT name, build FROM aggregator.masks WHERE build BETWEEN $1 AND $2`, lo, hi)
	if err != nil {
		return false, fmt.Errorf("read masks: %w", err)
	}
	var maskNames []string
	var maskBuilds []int64
	masked := make([]map[string]bool, len(inputs))
	for rows.Next() {
		var n string
		var b int64
		if err := rows.Scan(&n, &b); err != nil {
			rows.Close()
			return false, err
		}
		maskNames, maskBuilds = append(maskNames, n), append(maskBuilds, b)
		for i, in := range inputs {
			if in.Lo <= b && b <= in.Hi {
				if masked[i] == nil {
					masked[i] = map[string]bool{}
				}
				masked[i][n] = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read masks: %w", err)
	}
	c := clusterRow{Level: inputs[0].Level + 1, Name: fmt.Sprintf("L%d-%d-%d", inputs[0].Level+1, lo, hi), Lo: lo, Hi: hi}
	for _, in := range inputs {
		c.Sources += in.Sources
	}
	err = a.writeCluster(ctx, &c, len(inputs), func(i int) (io.ReadCloser, error) {
		in := inputs[i]
		var parts []string
		for p := range in.Parts {
			parts = append(parts, fmt.Sprintf("%s-%05d", in.Name, p))
		}
		r := cdxindex.ScanCluster(parts, func(part string) (io.ReadCloser, error) {
			rc, _, err := a.blob.Get(ctx, a.cfg.Prefix+in.Name+"/"+part+".cdx.gz")
			return rc, err
		})
		if m := masked[i]; m != nil {
			r = cdxindex.DropLines(r, func(line []byte) bool { return m[cdxindex.LineFile(line)] })
		}
		return r, nil
	})
	if err != nil {
		return false, fmt.Errorf("merge level %d clusters %s to %s: %w", inputs[0].Level, inputs[0].Name, inputs[len(inputs)-1].Name, err)
	}
	ids := make([]int64, len(inputs))
	for i, in := range inputs {
		ids[i] = in.ID
	}
	err = a.swapIn(ctx, c, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM aggregator.clusters WHERE id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(len(ids)) {
			return errors.New("the clusters merged were replaced meanwhile (two leaders?)")
		}
		for _, in := range inputs {
			if err := a.retire(ctx, tx, a.files(in.Name, in.Parts), "now()"); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM aggregator.masks m USING unnest($1::text[], $2::bigint[]) AS d(name, build)
			WHERE m.name = d.name AND m.build = d.build`, maskNames, maskBuilds)
		return err
	})
	if err != nil {
		return false, err
	}
	a.log.InfoContext(ctx, "clusters merged", "cluster", c.Name, "level", c.Level, "inputs", len(inputs), "lines", c.Lines,
		"masked_files", len(maskNames), "outputs", c.Sources)
	return true, nil
}

// retire records blob keys to delete after AGGREGATOR_RETIRE_AFTER,
// counted from at (an SQL time).
func (a *Aggregator) retire(ctx context.Context, tx pgx.Tx, keys []string, at string) error {
	_, err := tx.Exec(ctx, `INSERT INTO aggregator.retired (key, retired_at) SELECT k, `+at+` FROM unnest($1::text[]) AS k
		ON CONFLICT (key) DO UPDATE SET retired_at = EXCLUDED.retired_at`, keys)
	if err != nil {
		return fmt.Errorf("retire %d objects: %w", len(keys), err)
	}
	return nil
}

// writeCluster merges n sources into cluster c, bounded by the fan-in,
// writes it to a temporary directory and uploads its files, filling in
// c's sizes. The files are retired with a day's grace first: only the
// swap keeps them.
func (a *Aggregator) writeCluster(ctx context.Context, c *clusterRow, n int, open func(i int) (io.ReadCloser, error)) error {
	dir, err := os.MkdirTemp("", "cluster-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	z, err := cdxindex.NewZipNumWriter(dir, c.Name, a.cfg.BlockLines, 0)
	if err != nil {
		return err
	}
	if _, err := cdxindex.MergeBounded(z, n, a.cfg.FanIn, dir, open); err != nil {
		z.Close()
		return err
	}
	if err := z.Close(); err != nil {
		return fmt.Errorf("write cluster %s: %w", c.Name, err)
	}
	c.Lines, c.Blocks, c.Bytes, c.FirstKey, c.LastKey = z.Lines(), z.Blocks(), z.Bytes(), z.FirstKey(), z.LastKey()
	c.Parts = len(z.Files()) - 2
	keys := a.files(c.Name, c.Parts)
	if err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		return a.retire(ctx, tx, keys, "now() + interval '"+pendingGrace+"'")
	}); err != nil {
		return err
	}
	for i, f := range z.Files() {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		_, err = a.blob.Put(ctx, keys[i], fh, map[string]string{"content-type": contentType(f)})
		fh.Close()
		if err != nil {
			return fmt.Errorf("upload %s: %w", keys[i], err)
		}
	}
	return nil
}

func contentType(f string) string {
	if filepath.Ext(f) == ".gz" {
		return "application/gzip"
	}
	return "text/plain"
}

// swapIn records cluster c, keeps its files (no longer retired) and runs
// also in the same transaction: a query sees the cluster whole or not at
// all.
func (a *Aggregator) swapIn(ctx context.Context, c clusterRow, also func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO aggregator.clusters (level, name, parts, lo, hi, lines, blocks, bytes, sources, first_key, last_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			c.Level, c.Name, c.Parts, c.Lo, c.Hi, c.Lines, c.Blocks, c.Bytes, c.Sources, c.FirstKey, c.LastKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM aggregator.retired WHERE key = ANY($1)`, a.files(c.Name, c.Parts)); err != nil {
			return err
		}
		return also(tx)
	})
	if err != nil {
		return fmt.Errorf("swap in cluster %s: %w", c.Name, err)
	}
	return nil
}

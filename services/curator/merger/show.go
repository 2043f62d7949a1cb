package merger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/archivist/archivist/events"
	"github.com/archivist/archivist/services/curator/catalog"
)

// ErrNotFound is returned by Show for a key with no work row.
var ErrNotFound = errors.New("no work")

// View is what an operator needs to see of a work: the row of the asked
// key, the work it resolves to, its graph as the matcher last stored it,
// its members' source records with their versions, and the redirects.
type View struct {
	// Asked is the row of the key asked for (a work, a redirect, or gone).
	Asked Row `json:"asked"`
	// Work is the merged work Asked resolves to (Asked itself for a work).
	Work *Row `json:"work,omitempty"`
	// Graph is the matcher's graph of the work: members and when matched.
	Graph []Node `json:"graph"`
	// Sources are the members' source records.
	Sources []catalog.Record `json:"sources"`
	// Redirects are the rows pointing at the work.
	Redirects []Row `json:"redirects"`
}

// Node is a matcher node.
type Node struct {
	Key       string     `json:"key"`
	Graph     string     `json:"graph"`
	MatchedAt *time.Time `json:"matched_at"`
}

const rowColumns = `kind, key, version, state, redirect_to, members, title, media_key, media_sha256, duration_ms, priority,
	coalesce(initial_curated_at, 'epoch'), coalesce(latest_curated_at, 'epoch')`

func scanRow(row pgx.CollectableRow) (Row, error) {
	var r Row
	err := row.Scan(&r.Kind, &r.Key, &r.Version, &r.State, &r.RedirectTo, &r.Members, &r.Title, &r.Media.Key,
		&r.Media.SHA256, &r.DurationMS, &r.Priority, &r.InitialCuratedAt, &r.LatestCuratedAt)
	r.Version = r.Version.UTC()
	if r.State != events.WorkMerged {
		r.InitialCuratedAt, r.LatestCuratedAt = time.Time{}, time.Time{}
	} else {
		r.InitialCuratedAt, r.LatestCuratedAt = r.InitialCuratedAt.UTC(), r.LatestCuratedAt.UTC()
	}
	return r, err
}

// Rows reads every work row of a kind, in key order.
func Rows(ctx context.Context, q catalog.Querier, kind catalog.Kind) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT `+rowColumns+` FROM curator.works WHERE kind = $1 ORDER BY key`, string(kind))
	if err != nil {
		return nil, fmt.Errorf("read works: %w", err)
	}
	return pgx.CollectRows(rows, scanRow)
}

func getRow(ctx context.Context, q catalog.Querier, kind catalog.Kind, key string) (Row, error) {
	rows, err := q.Query(ctx, `SELECT `+rowColumns+` FROM curator.works WHERE kind = $1 AND key = $2`, string(kind), key)
	if err != nil {
		return Row{}, fmt.Errorf("read work %s: %w", key, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, fmt.Errorf("%s %s: %w", kind, key, ErrNotFound)
	}
	return r, err
}

// Show assembles the View of key.
func Show(ctx context.Context, q catalog.Querier, kind catalog.Kind, key string) (View, error) {
	asked, err := getRow(ctx, q, kind, key)
	if err != nil {
		return View{}, err
	}
	v := View{Asked: asked}
	switch asked.State {
	case events.WorkMerged:
		v.Work = &asked
	case events.WorkRedirect:
		w, err := getRow(ctx, q, kind, asked.RedirectTo)
		if err != nil {
			return View{}, err
		}
		v.Work = &w
	}
	members := []string{key}
	if v.Work != nil {
		members = v.Work.Members
		rows, err := q.Query(ctx, `SELECT `+rowColumns+` FROM curator.works
			WHERE kind = $1 AND state = 'redirect' AND redirect_to = $2 ORDER BY key`, string(kind), v.Work.Key)
		if err != nil {
			return View{}, fmt.Errorf("read redirects: %w", err)
		}
		if v.Redirects, err = pgx.CollectRows(rows, scanRow); err != nil {
			return View{}, err
		}
	}
	rows, err := q.Query(ctx, `SELECT key, graph, matched_at FROM curator.match_nodes WHERE kind = $1 AND key = ANY($2) ORDER BY key`,
		string(kind), members)
	if err != nil {
		return View{}, fmt.Errorf("read graph: %w", err)
	}
	if v.Graph, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Node]); err != nil {
		return View{}, err
	}
	if v.Sources, err = catalog.GetMany(ctx, q, kind, members); err != nil {
		return View{}, err
	}
	return v, nil
}

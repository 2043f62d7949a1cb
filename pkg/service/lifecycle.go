package service

import (
	"context"
	"errors"

	"github.com/archivist/archivist/pkg/leader"
)

// AsLeader runs loop in one replica of the service at a time
// (leader.Elect on the service's database, paced by LEADER_RETRY).
func (e *Env) AsLeader(name string, loop Loop) Loop {
	return leader.Elect(e.DB, name, e.LeaderRetry, e.Log, loop)
}

// All is a Loop running loops side by side until ctx ends; it returns
// their errors, joined, once all have returned.
func All(loops ...Loop) Loop {
	return func(ctx context.Context) error {
		errs := make(chan error, len(loops))
		for _, l := range loops {
			go func() { errs <- l(ctx) }()
		}
		var all []error
		for range loops {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}

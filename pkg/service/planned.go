package service

import "context"

// Planned is the definition of a service whose feature is not built yet: it
// starts, reports ready, logs what it will do, and does nothing else until
// it is stopped. It does no fake work.
func Planned(name, summary string, plan ...string) Definition {
	return Definition{
		Name:    name,
		Summary: summary + " (not built yet)",
		Run: func(ctx context.Context, env *Env) error {
			for _, p := range plan {
				env.Log.InfoContext(ctx, "planned", "work", p)
			}
			env.Ready()
			<-ctx.Done()
			return nil
		},
	}
}

// Package auditor is the auditor service: checks every stored object's bits against the storage provider, the content index and the audit log.
package auditor

import "github.com/archivist/archivist/pkg/service"

// Definition is the auditor service. Its feature is not built yet; see the
// open issues and docs/auditor.md.
func Definition() service.Definition {
	return service.Planned("auditor", "checks every stored object's bits against the storage provider, the content index and the audit log",
		"keep the content index and audit log from recorded and deleted objects",
		"schedule bit-integrity tasks, apply the 11 outcomes, manage workers with priorities, backoff and dead letters",
	)
}

// Command auditor runs the auditor service: checks every stored object's bits against the storage provider, the content index and the audit log. See docs/auditor.md.
package main

import (
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/services/auditor/auditor"
)

func main() { service.Main(auditor.Definition()) }

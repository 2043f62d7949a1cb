package refdocs

import (
	"slices"
	"strings"

	"github.com/archivist/archivist/pkg/blob"
	"github.com/archivist/archivist/pkg/bus"
	"github.com/archivist/archivist/pkg/config"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/logging"
	"github.com/archivist/archivist/pkg/service"
	"github.com/archivist/archivist/pkg/store"
	"github.com/archivist/archivist/services/archivist/all"
)

// VariableGroup is a set of environment variables some services read
// alike (every service, those with a database, those with an API...).
type VariableGroup struct {
	Name string
	Vars []string
	// Reads says whether a service reads the group's variables.
	Reads func(d service.Definition, routes []string) bool
}

// names is the variable names of configuration struct cfg.
func names(cfg any) []string {
	var out []string
	for _, v := range config.Vars(cfg) {
		out = append(out, v.Name)
	}
	return out
}

// VariableGroups are the groups of shared variables, the first every
// service's.
func VariableGroups() []VariableGroup {
	shared := slices.Concat(names(&bus.Config{}), names(&store.Config{}), names(&blob.Config{}), names(&service.HTTPLimits{}), names(&httpauth.Config{}))
	common := slices.DeleteFunc(names(&service.Common{}), func(n string) bool { return slices.Contains(shared, n) })
	return []VariableGroup{
		{"every service", slices.Concat(common, names(&logging.Config{})), func(service.Definition, []string) bool { return true }},
		{"NATS", names(&bus.Config{}), func(d service.Definition, _ []string) bool { return d.NeedsBus }},
		{"PostgreSQL", names(&store.Config{}), func(d service.Definition, _ []string) bool { return d.NeedsDB }},
		{"blob store", names(&blob.Config{}), func(d service.Definition, _ []string) bool { return d.NeedsBlob }},
		{"API", slices.Concat(names(&service.HTTPLimits{}), names(&httpauth.Config{})), func(_ service.Definition, routes []string) bool { return len(routes) > 0 }},
	}
}

// Variables is the variables by service: the shared groups, then each
// service's groups and its own variables.
func Variables(root string) string {
	routes, err := ServiceRoutes(root)
	if err != nil {
		return "(the services' sources could not be read: " + err.Error() + ")\n"
	}
	vgroups := VariableGroups()
	var groups [][]string
	for _, g := range vgroups {
		groups = append(groups, []string{g.Name, codes(g.Vars)})
	}
	var rows [][]string
	for _, d := range all.Services() {
		var reads []string
		for _, g := range vgroups[1:] {
			if g.Reads(d, routes[d.Name]) {
				reads = append(reads, g.Name)
			}
		}
		rows = append(rows, []string{d.Name, strings.Join(reads, ", "), codes(names(d.Config))})
	}
	return table([]string{"group", "variables"}, groups) + "\n" + table([]string{"service", "besides every service's, reads", "its own variables"}, rows)
}

package refdocs

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Metric is one metric family the services export, as its source
// declares it.
type Metric struct {
	Name, Type, Help string
	// Labels are its variable labels (none for a single series).
	Labels []string
	// Package is the directory that declares it, from the repository's
	// root.
	Package string
}

// ExportedMetrics reads every metric family declared in the runtime code
// under root (pkg/ and services/, tests left out): the Name and Help of
// each prometheus.CounterOpts, GaugeOpts, HistogramOpts and SummaryOpts,
// with the labels of the Vec it makes; each service.Gauge (the families
// read on a scrape); and each prometheus.NewDesc (the collectors').
func ExportedMetrics(root string) ([]Metric, error) {
	var files []*ast.File
	var dirs []string
	for _, top := range []string{"events", "pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && (e.Name() == "testdata" || e.Name() == "gen") {
				return filepath.SkipDir
			}
			if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			files, dirs = append(files, f), append(dirs, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// A name may be a constant of a package (events.MetricOpenResearch).
	consts := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if v := stringLit(vs.Values[i], nil); v != "" {
								consts[f.Name.Name+"."+n.Name] = v
							}
						}
					}
				}
			}
		}
	}
	var out []Metric
	for i, f := range files {
		out = append(out, metricsOf(f, dirs[i], consts)...)
	}
	slices.SortFunc(out, func(a, b Metric) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Metric) bool { return a.Name == b.Name }), nil
}

// metricsOf is the metric families file f declares.
func metricsOf(f *ast.File, pkg string, consts map[string]string) []Metric {
	// Label lists named by a variable: labels := []string{"a", "b"}.
	lists := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					if ss, ok := stringList(as.Rhs[i], nil, consts); ok {
						lists[id.Name] = ss
					}
				}
			}
		}
		return true
	})
	var out []Metric
	add := func(m Metric) {
		if strings.HasPrefix(m.Name, "archivist_") {
			m.Package = pkg
			out = append(out, m)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || len(n.Args) == 0 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "prometheus" && sel.Sel.Name == "NewDesc" && len(n.Args) >= 3 {
				name, help := stringLit(n.Args[0], consts), stringLit(n.Args[1], consts)
				labels, _ := stringList(n.Args[2], lists, consts)
				typ := "gauge"
				if strings.HasSuffix(name, "_total") {
					typ = "counter"
				}
				add(Metric{Name: name, Type: typ, Help: help, Labels: labels})
				return true
			}
			// A Vec's labels are its second argument.
			if lit, ok := n.Args[0].(*ast.CompositeLit); ok && strings.HasSuffix(sel.Sel.Name, "Vec") && len(n.Args) > 1 {
				if m, ok := optsMetric(lit, consts); ok {
					m.Labels, _ = stringList(n.Args[1], lists, consts)
					add(m)
					return false
				}
			}
		case *ast.CompositeLit:
			if m, ok := optsMetric(n, consts); ok {
				add(m)
				return false
			}
			if arr, ok := n.Type.(*ast.ArrayType); ok && isGaugeType(arr.Elt) {
				for _, el := range n.Elts {
					if lit, ok := el.(*ast.CompositeLit); ok {
						add(gaugeMetric(lit, lists, consts))
					}
				}
				return false
			}
			if isGaugeType(n.Type) {
				add(gaugeMetric(n, lists, consts))
				return false
			}
		}
		return true
	})
	return out
}

// optsMetric is the metric of a prometheus.XOpts literal.
func optsMetric(lit *ast.CompositeLit, consts map[string]string) (Metric, bool) {
	sel, ok := lit.Type.(*ast.SelectorExpr)
	if !ok {
		return Metric{}, false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
		return Metric{}, false
	}
	typ, ok := map[string]string{"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary"}[sel.Sel.Name]
	if !ok {
		return Metric{}, false
	}
	m := Metric{Type: typ}
	m.fill(lit, nil, consts)
	return m, m.Name != ""
}

// isGaugeType reports whether t names service.Gauge (Gauge inside package
// service).
func isGaugeType(t ast.Expr) bool {
	switch t := t.(type) {
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		return ok && x.Name == "service" && t.Sel.Name == "Gauge"
	case *ast.Ident:
		return t.Name == "Gauge"
	}
	return false
}

// gaugeMetric is the metric of a service.Gauge literal.
func gaugeMetric(lit *ast.CompositeLit, lists map[string][]string, consts map[string]string) Metric {
	m := Metric{Type: "gauge"}
	m.fill(lit, lists, consts)
	return m
}

// fill sets m's Name, Help and Labels from a literal's fields of those
// names.
func (m *Metric) fill(lit *ast.CompositeLit, lists map[string][]string, consts map[string]string) {
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			switch key(kv) {
			case "Name":
				m.Name = stringLit(kv.Value, consts)
			case "Help":
				m.Help = stringLit(kv.Value, consts)
			case "Labels":
				m.Labels, _ = stringList(kv.Value, lists, consts)
			}
		}
	}
}

func key(kv *ast.KeyValueExpr) string {
	if id, ok := kv.Key.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// stringLit is the value of a string literal, of a package's constant
// in consts ("events.MetricOpenResearch"), or of a sum of them ("" if e is
// none of these).
func stringLit(e ast.Expr, consts map[string]string) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return consts[x.Name+"."+e.Sel.Name]
		}
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			if err == nil {
				return s
			}
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return stringLit(e.X, consts) + stringLit(e.Y, consts)
		}
	case *ast.ParenExpr:
		return stringLit(e.X, consts)
	}
	return ""
}

// stringList is the strings of a []string literal, or of the variable
// lists names.
func stringList(e ast.Expr, lists map[string][]string, consts map[string]string) ([]string, bool) {
	switch e := e.(type) {
	case *ast.Ident:
		ss, ok := lists[e.Name]
		return ss, ok
	case *ast.CompositeLit:
		arr, ok := e.Type.(*ast.ArrayType)
		if !ok {
			return nil, false
		}
		if id, ok := arr.Elt.(*ast.Ident); !ok || id.Name != "string" {
			return nil, false
		}
		var out []string
		for _, el := range e.Elts {
			s := stringLit(el, consts)
			if s == "" {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// Metrics is every metric family the services export (ExportedMetrics),
// a row each.
func Metrics(root string) string {
	ms, err := ExportedMetrics(root)
	if err != nil {
		return "(the sources could not be read: " + err.Error() + ")\n"
	}
	var rows [][]string
	for _, m := range ms {
		rows = append(rows, []string{code(m.Name), m.Type, codes(m.Labels), m.Help, code(m.Package)})
	}
	return table([]string{"metric", "type", "labels", "meaning", "declared in"}, rows) +
		fmt.Sprintf("\n%d metric families; a histogram's series add `_bucket`, `_sum` and `_count` to its name.\n", len(ms))
}

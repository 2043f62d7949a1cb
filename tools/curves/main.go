// Command curves reads `go test -bench` output of the cost-curve
// benchmarks (sub-benchmarks named n=N) and draws, for each benchmark, the
// cost per item and the peak memory against N on log axes, one PNG each,
// and prints a Markdown table of every point.
//
//	go run ./tools/curves -out docs/curves < bench.txt > table.md
//	go run ./tools/curves -metrics us/item,peak-MiB ... # draw only these
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// point is one sub-benchmark's metrics.
type point struct {
	n       float64
	metrics map[string]float64
}

var line = regexp.MustCompile(`^Benchmark(\w+)/n=(\d+)(?:-\d+)?\s+\d+\s+(.*)$`)

func main() {
	out := flag.String("out", "docs/curves", "directory for the PNG files")
	only := flag.String("metrics", "", "the metrics to draw, comma-separated (default: every one but the total)")
	flag.Parse()
	if *only != "" {
		drawn = strings.Split(*only, ",")
	}
	if err := run(os.Stdin, os.Stdout, *out); err != nil {
		fmt.Fprintln(os.Stderr, "curves:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, table io.Writer, dir string) error {
	curves, err := parse(in)
	if err != nil {
		return err
	}
	if len(curves) == 0 {
		return fmt.Errorf("no n=N sub-benchmark lines in the input")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(curves))
	for name := range curves {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pts := curves[name]
		sort.Slice(pts, func(i, j int) bool { return pts[i].n < pts[j].n })
		var metrics []string
		for m := range pts[0].metrics {
			if m != "ns/op" {
				metrics = append(metrics, m)
			}
		}
		sort.Strings(metrics)
		fmt.Fprintf(table, "\n**%s**\n\n| N |", name)
		for _, m := range metrics {
			fmt.Fprintf(table, " %s |", m)
		}
		fmt.Fprintf(table, "\n| ---: |%s\n", strings.Repeat(" ---: |", len(metrics)))
		for _, p := range pts {
			fmt.Fprintf(table, "| %s |", human(p.n))
			for _, m := range metrics {
				fmt.Fprintf(table, " %s |", strconv.FormatFloat(p.metrics[m], 'g', 4, 64))
			}
			fmt.Fprintln(table)
		}
		if err := drawCurve(filepath.Join(dir, strings.ToLower(name)+".png"), name, pts, metrics); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// parse reads the benchmark lines: name, N and "value unit" pairs.
func parse(in io.Reader) (map[string][]point, error) {
	curves := map[string][]point{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		n, _ := strconv.ParseFloat(m[2], 64)
		f := strings.Fields(m[3])
		p := point{n: n, metrics: map[string]float64{}}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q", m[0], f[i])
			}
			p.metrics[f[i+1]] = v
		}
		curves[m[1]] = append(curves[m[1]], p)
	}
	return curves, sc.Err()
}

// drawCurve plots each metric but the totals against N, log-log, side by side.
// drawn are the metrics -metrics names (nil: every one but the total).
var drawn []string

func drawCurve(path, name string, pts []point, metrics []string) error {
	var shown []string
	for _, m := range metrics {
		if drawn != nil && slices.Contains(drawn, m) || drawn == nil && m != "s" { // the total: per item and memory say more
			shown = append(shown, m)
		}
	}
	if len(shown) == 0 {
		shown = metrics
	}
	const w, h = 4 * vg.Inch, 3 * vg.Inch
	img := vg.Length(len(shown)) * w
	canvas := plotCanvas(img, h)
	for i, m := range shown {
		p := plot.New()
		p.Title.Text = name + ": " + m
		p.X.Label.Text = "N (items)"
		p.Y.Label.Text = m
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		xy := make(plotter.XYs, 0, len(pts))
		for _, pt := range pts {
			if v := pt.metrics[m]; v > 0 {
				xy = append(xy, plotter.XY{X: pt.n, Y: v})
			}
		}
		if len(xy) == 0 {
			continue
		}
		if err := plotutil.AddLinePoints(p, m, xy); err != nil {
			return err
		}
		ys := make([]float64, len(xy))
		for j := range xy {
			ys[j] = xy[j].Y
		}
		lo, hi := slices.Min(ys), slices.Max(ys)
		p.Y.Min, p.Y.Max = lo/2, hi*2 // room, and a flat curve looks flat
		canvas.draw(p, vg.Length(i)*w, w, h)
	}
	return canvas.save(path)
}

// human writes N as 10^k when it is a power of ten.
func human(n float64) string {
	k := 0
	for v := n; v >= 10 && int64(v)%10 == 0; v /= 10 {
		k++
	}
	if k >= 3 && n == pow10(k) {
		return fmt.Sprintf("10^%d", k)
	}
	return strconv.FormatFloat(n, 'f', -1, 64)
}

func pow10(k int) float64 {
	v := 1.0
	for range k {
		v *= 10
	}
	return v
}

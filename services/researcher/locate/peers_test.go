package locate_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archivist/archivist/services/researcher/locate"
)

// A peer is another fingerprinter run on the same corpus as the locator:
// index makes its database of the corpus's clips in dir, then find
// locates them in episode files (one condition's), returning what it
// reported with its own score as Confidence, and the wall time it took.
type peer struct {
	name       string
	thresholds []float64 // its score at and above which a hit counts: its default first
	index      func(b *testing.B, c *corpus, dir string)
	find       func(b *testing.B, c *corpus, dir string, files []string) ([][]locate.Occurrence, time.Duration)
}

// peers are the fingerprinters found on this machine: Olaf where
// ARCHIVIST_OLAF names its olaf_core binary, audfprint where
// ARCHIVIST_AUDFPRINT names its audfprint.py (run with python3, or the
// interpreter ARCHIVIST_AUDFPRINT_PYTHON names: one with numpy, scipy,
// docopt and joblib). Neither
// is fetched or built here: docs/PERFORMANCE.md says how they were built.
func peers() []peer {
	var ps []peer
	if bin := os.Getenv("ARCHIVIST_OLAF"); bin != "" {
		ps = append(ps, olaf(bin))
	}
	if py := os.Getenv("ARCHIVIST_AUDFPRINT"); py != "" {
		ps = append(ps, audfprint(py))
	}
	return ps
}

// writeRaw writes a file as Olaf reads audio: mono 32-bit float samples
// at 16 kHz, little-endian, no header (decoded by our decoder).
func writeRaw(b *testing.B, from, to string) {
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, decodeFileAt(b, from, 16000)); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(to, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
}

func clipFile(b testing.TB, c *corpus, name string) string {
	m, _ := filepath.Glob(filepath.Join(c.dir, "clips", name+".*"))
	if len(m) == 0 {
		b.Fatalf("clip %s: no file", name)
	}
	return m[0]
}

// olaf runs Olaf's command-line core (olaf_core, its Makefile's
// compile_core) with its default configuration: clips stored with
// "store", each episode queried with "query". Its database lives in
// $HOME/.olaf/db, so HOME is the benchmark's folder. Its time does not
// count the conversion of the episode to the raw samples it reads (its
// own CLI does that with ffmpeg).
func olaf(bin string) peer {
	run := func(b *testing.B, dir string, args ...string) []byte {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("olaf %s: %v\n%s", args[0], err, errb.Bytes())
		}
		return out.Bytes()
	}
	return peer{
		name:       "Olaf",
		thresholds: []float64{6, 10, 20},
		index: func(b *testing.B, c *corpus, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, ".olaf", "db"), 0o755); err != nil {
				b.Fatal(err)
			}
			args := []string{"store"}
			for _, cl := range c.clips {
				raw := filepath.Join(dir, cl.Name+".raw")
				writeRaw(b, clipFile(b, c, cl.Name), raw)
				args = append(args, raw, cl.Name)
			}
			run(b, dir, args...)
		},
		find: func(b *testing.B, c *corpus, dir string, files []string) ([][]locate.Occurrence, time.Duration) {
			var took time.Duration
			found := make([][]locate.Occurrence, len(files))
			for i, f := range files {
				raw := filepath.Join(dir, "episode.raw")
				writeRaw(b, f, raw)
				t0 := time.Now()
				out := run(b, dir, "query", raw, "episode")
				took += time.Since(t0)
				// count, query start, query stop, name, id, reference start, reference stop
				sc := bufio.NewScanner(bytes.NewReader(out))
				for sc.Scan() {
					f := strings.Split(sc.Text(), ", ")
					if len(f) != 7 || f[3] == "" {
						continue
					}
					n, _ := strconv.Atoi(f[0])
					qs, _ := strconv.ParseFloat(f[1], 64)
					rs, _ := strconv.ParseFloat(f[5], 64)
					found[i] = append(found[i], locate.Occurrence{Name: f[3], Offset: qs - rs, Confidence: float64(n)})
				}
			}
			return found, took
		},
	}
}

var audfprintHit = regexp.MustCompile(`^Matched (\S+) [\d.]+ sec \d+ raw hashes as (\S+) at\s+(-?[\d.]+) s with\s+(\d+) of`)

// audfprint runs audfprint the way its searching_for_ads.md finds
// adverts in recorded shows: a database of the clips at density 100,
// 11.025 kHz, 4 shifts; every episode of a condition matched in one
// run (--max-matches 1000, the lowest --min-count shown). It reads the
// episodes itself (ffmpeg), on one core. Its "at" time is printed to the
// millisecond (its source prints a tenth of a second: patched where it
// was built, docs/PERFORMANCE.md).
func audfprint(py string) peer {
	run := func(b *testing.B, args ...string) []byte {
		python := cmp.Or(os.Getenv("ARCHIVIST_AUDFPRINT_PYTHON"), "python3")
		cmd := exec.Command(python, append([]string{py}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("audfprint %s: %v\n%s", args[0], err, errb.Bytes())
		}
		return out.Bytes()
	}
	list := func(b *testing.B, path string, files []string) string {
		if err := os.WriteFile(path, []byte(strings.Join(files, "\n")+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	return peer{
		name:       "audfprint",
		thresholds: []float64{5, 10, 20},
		index: func(b *testing.B, c *corpus, dir string) {
			var files []string
			for _, cl := range c.clips {
				files = append(files, clipFile(b, c, cl.Name))
			}
			run(b, "new", "--dbase", filepath.Join(dir, "clips.db"), "--density", "100", "--samplerate", "11025", "--shifts", "4",
				"--list", list(b, filepath.Join(dir, "clips.list"), files))
		},
		find: func(b *testing.B, c *corpus, dir string, files []string) ([][]locate.Occurrence, time.Duration) {
			t0 := time.Now()
			out := run(b, "match", "--dbase", filepath.Join(dir, "clips.db"), "--density", "100", "--samplerate", "11025", "--shifts", "1",
				"--match-win", "2", "--min-count", "5", "--max-matches", "1000", "--sortbytime", "--ncores", "1",
				"--list", list(b, filepath.Join(dir, "episodes.list"), files))
			took := time.Since(t0)
			found := make([][]locate.Occurrence, len(files))
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				m := audfprintHit.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				i := slices.Index(files, m[1])
				at, _ := strconv.ParseFloat(m[3], 64)
				n, _ := strconv.Atoi(m[4])
				name := strings.TrimSuffix(filepath.Base(m[2]), filepath.Ext(m[2]))
				if i >= 0 {
					found[i] = append(found[i], locate.Occurrence{Name: name, Offset: -at, Confidence: float64(n)})
				}
			}
			return found, took
		},
	}
}

// strongest keeps, of a peer's hits, those at or above min and, of hits
// of one clip closer than 0.9 of its length, the strongest: both peers
// report a hit for every alignment that gathered enough matches, so a
// repeating clip is reported at each of its repeats, where the locator
// keeps one (the same rule).
func strongest(c *corpus, hits []locate.Occurrence, min float64) []locate.Occurrence {
	hs := slices.Clone(hits)
	slices.SortStableFunc(hs, func(a, b locate.Occurrence) int { return cmp.Compare(b.Confidence, a.Confidence) })
	var kept []locate.Occurrence
	for _, h := range hs {
		if h.Confidence < min {
			break
		}
		near := false
		for _, k := range kept {
			if k.Name == h.Name && math.Abs(k.Offset-h.Offset) < math.Max(0.9*c.duration[h.Name], 0.5) {
				near = true
				break
			}
		}
		if !near {
			kept = append(kept, h)
		}
	}
	return kept
}

// BenchmarkPeers runs Olaf and audfprint (see peers) side by side with the
// locator, in one run, on the accuracy benchmark's corpora and scoring:
// per condition, each one's recall, precision and false alarms an hour
// (the peers at their default threshold and stricter ones), and how much
// faster than realtime each located, on one core. Without either peer it
// fails, saying how to name them.
//
//	ARCHIVIST_OLAF=.../olaf/bin/olaf_core ARCHIVIST_AUDFPRINT=.../audfprint/audfprint.py \
//	go test -run '^$' -bench Peers -benchtime 1x -timeout 3h ./locate/
func BenchmarkPeers(b *testing.B) {
	ps := peers()
	if len(ps) == 0 {
		b.Fatal("no peer to compare with: set ARCHIVIST_OLAF to Olaf's olaf_core binary and/or ARCHIVIST_AUDFPRINT to audfprint's audfprint.py (docs/PERFORMANCE.md says how they were built)")
	}
	conds := []string{"clean", "lp4k_mp3_64k", "snr10", "snr0", "gsm8k", "speed102"}
	for _, tc := range timeConditions {
		conds = append(conds, tc.name)
	}
	if v := os.Getenv("ARCHIVIST_LOCATE_CONDITIONS"); v != "" {
		conds = strings.Split(v, ",")
	}
	type row struct {
		s       *score
		seconds float64       // of audio
		took    time.Duration // locating it
	}
	for range b.N {
		// rows[who][threshold][cond]
		rows := map[string]map[float64]map[string]*row{}
		get := func(who string, th float64, cond string) *row {
			if rows[who] == nil {
				rows[who] = map[float64]map[string]*row{}
			}
			if rows[who][th] == nil {
				rows[who][th] = map[string]*row{}
			}
			if rows[who][th][cond] == nil {
				rows[who][th][cond] = &row{s: newScore()}
			}
			return rows[who][th][cond]
		}
		var dirs []string
		for _, dir := range accuracyCorpora(b) {
			c := loadCorpus(b, dir)
			x, err := locate.NewIndex(locate.DefaultParams, c.clips)
			if err != nil {
				b.Fatal(err)
			}
			c.findWithin(x)
			work := make([]string, len(ps))
			for i, p := range ps {
				work[i] = b.TempDir()
				p.index(b, c, work[i])
			}
			for _, cond := range conds {
				if _, ok := c.conditions[cond]; !ok {
					continue
				}
				var files []string
				for _, ep := range c.episodes {
					files = append(files, c.episodeFile(ep, cond))
				}
				lens := make([]float64, len(files))
				ours := get("archivist", locate.Threshold, cond)
				for i, f := range files {
					t0 := time.Now()
					found, seconds := locateFile(b, x, f, locate.Threshold)
					ours.took += time.Since(t0)
					lens[i] = seconds
					ours.seconds += lens[i]
					c.score(ours.s, c.episodes[i], cond, lens[i], found)
				}
				for pi, p := range ps {
					found, took := p.find(b, c, work[pi], files)
					for _, th := range p.thresholds {
						r := get(p.name, th, cond)
						r.took += took
						for i := range files {
							r.seconds += lens[i]
							c.score(r.s, c.episodes[i], cond, lens[i], strongest(c, found[i], th))
						}
					}
				}
			}
			dirs = append(dirs, filepath.Base(dir))
		}
		var out strings.Builder
		fmt.Fprintf(&out, "\n%s, side by side (realtime: seconds of audio located per second, one core)\n\n", strings.Join(dirs, ", "))
		fmt.Fprintf(&out, "| condition | locator (threshold) | recall ≥3 s | recall <3 s | precision | false alarms/h | realtime |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		whos := []string{"archivist"}
		ths := map[string][]float64{"archivist": {locate.Threshold}}
		for _, p := range ps {
			whos = append(whos, p.name)
			ths[p.name] = p.thresholds
		}
		for _, cond := range conds {
			for _, who := range whos {
				for _, th := range ths[who] {
					r := rows[who][th][cond]
					if r == nil {
						continue
					}
					s := r.s
					lo, hi := rateCI(s.fp, s.hours)
					fmt.Fprintf(&out, "| %s | %s (%g) | %s | %s | %s | %.2f [%.2f, %.2f] | %.0f× |\n", cond, who, th,
						prop(s.longTP, s.longTP+s.longFN), prop(s.tp-s.longTP, s.tp-s.longTP+s.fn-s.longFN), prop(s.tp, s.tp+s.fp),
						float64(s.fp)/s.hours, lo, hi, r.seconds/r.took.Seconds())
				}
			}
		}
		fmt.Print(out.String())
	}
}

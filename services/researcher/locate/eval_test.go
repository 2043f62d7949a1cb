package locate_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/archivist/archivist/services/researcher/audio"
	"github.com/archivist/archivist/services/researcher/locate"

	"github.com/archivist/archivist/devkit/testenv"
)

// corpus is one build of make_corpus.sh (or testdata/audio/mini).
type corpus struct {
	dir        string
	clips      []locate.Clip
	role       map[string]string // clip → target | distractor
	kind       map[string]string // clip → music, sfx, speech
	duration   map[string]float64
	conditions map[string]string // condition → file name
	episodes   []string
	truth      map[string][]truthOcc // episode/condition → occurrences
	// inBand is, per clip, the share of its energy below 4 kHz, and
	// telephone the conditions whose audio keeps nothing above 4 kHz
	// (see outOfBand); nil until measureBands.
	inBand    map[string]float64
	telephone map[string]bool
	// within lists, for a clip, the clips whose audio contains it and where:
	// corpus sources that are the same sound under two names (Yaru's
	// desktop-login and system-ready) or one inside another.
	within map[string][]truthOcc
}

// findWithin locates every clip inside every other clip's audio.
func (c *corpus) findWithin(x *locate.Index) {
	c.within = map[string][]truthOcc{}
	for _, b := range c.clips {
		m := locate.NewMatcher(x)
		m.Write(b.Samples)
		m.WriteHigh(b.High)
		for _, o := range m.Finish() {
			if o.Name != b.Name {
				c.within[o.Name] = append(c.within[o.Name], truthOcc{clip: b.Name, offset: o.Offset})
			}
		}
	}
}

type truthOcc struct {
	clip   string
	offset float64
	mode   string // how it was mixed: replace, duck, overlay
}

func readTSV(t testing.TB, path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		if sc.Text() != "" {
			rows = append(rows, strings.Split(sc.Text(), "\t"))
		}
	}
	return rows
}

// decodeFileAt decodes a whole file to mono samples at rate.
func decodeFileAt(t testing.TB, path string, rate int) []float32 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := audio.Decode(f, rate)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	x, err := audio.ReadAll(s)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return x
}

// lowShare is the share of a file's energy below 4 kHz: its energy per
// second after the resampler to 8 kHz over that at its own rate.
func lowShare(t testing.TB, path string) float64 {
	var x []float32
	var rate int
	readFile(t, path, func(s audio.Stream) (err error) {
		rate = s.SampleRate()
		x, err = audio.ReadAll(s)
		return err
	})
	full := energy(x) / float64(rate)
	if rate <= 8000 || full == 0 {
		return 1
	}
	y, err := audio.ReadAll(audio.Resample(audio.Samples(x, rate), 8000))
	if err != nil {
		t.Fatal(err)
	}
	return energy(y) / 8000 / full
}

// highEnergy is the energy of a file's band from 5.5 to 9 kHz
// (audio.HighBand), 0 where its rate has no such band.
func highEnergy(t testing.TB, path string) (e float64) {
	readFile(t, path, func(s audio.Stream) error {
		hb, ok := audio.HighBand(s)
		if !ok {
			return nil
		}
		x, err := audio.ReadAll(hb)
		e = energy(x)
		return err
	})
	return e
}

func energy(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

// outOfBand is the share of a clip's energy below 4 kHz under which its
// occurrences in a condition that keeps nothing above 4 kHz (a telephone
// line, a 4 kHz low-pass) are counted apart: what is left of the clip
// there is 20 dB or more under the clip, less than of a clip played far
// under the bed. Its occurrences still count in every recall; the column
// "≥3 s in band" leaves them out.
const outOfBand = 0.01

// readFile opens an audio file for read, within the Locator's bound on an
// episode's length, which fails the test with the file's name on an error.
func readFile(t testing.TB, path string, read func(audio.Stream) error) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lim := audio.DefaultLimits
	lim.MaxDuration = locate.DefaultMaxEpisode // as the Locator bounds an episode
	s, err := audio.OpenLimited(f, lim)
	if err == nil {
		err = read(s)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readClipFile decodes a clip file as the Locator does (locate.ReadClip).
func readClipFile(t testing.TB, name, path string) (c locate.Clip) {
	readFile(t, path, func(s audio.Stream) (err error) {
		c, err = locate.ReadClip(name, s, locate.DefaultParams)
		return err
	})
	return c
}

// locateFile streams an episode file through x as the Locator does
// (Matcher.Stream) and returns what was found and the episode's length in
// seconds.
func locateFile(t testing.TB, x *locate.Index, path string, minConf float64) (found []locate.Occurrence, seconds float64) {
	readFile(t, path, func(s audio.Stream) error {
		cs := &counted{Stream: s}
		m := locate.NewMatcher(x)
		m.MinConfidence = minConf
		if err := m.Stream(context.Background(), cs); err != nil {
			return err
		}
		found, seconds = m.Finish(), float64(cs.n)/float64(s.SampleRate())
		return nil
	})
	return found, seconds
}

// counted counts the samples read from a Stream.
type counted struct {
	audio.Stream
	n int64
}

func (c *counted) Read(buf []float32) (int, error) {
	n, err := c.Stream.Read(buf)
	c.n += int64(n)
	return n, err
}

func loadCorpus(t testing.TB, dir string) *corpus {
	c := &corpus{dir: dir, role: map[string]string{}, kind: map[string]string{}, duration: map[string]float64{}, conditions: map[string]string{}, truth: map[string][]truthOcc{}}
	for _, r := range readTSV(t, filepath.Join(dir, "clips.tsv")) {
		c.clips = append(c.clips, readClipFile(t, r[0], clipFile(t, c, r[0])))
		c.role[r[0]], c.kind[r[0]] = r[1], r[2]
		c.duration[r[0]], _ = strconv.ParseFloat(r[3], 64)
	}
	for _, r := range readTSV(t, filepath.Join(dir, "conditions.tsv")) {
		c.conditions[r[0]] = r[1]
	}
	eps, _ := os.ReadDir(filepath.Join(dir, "episodes"))
	for _, e := range eps {
		c.episodes = append(c.episodes, e.Name())
	}
	for _, r := range readTSV(t, filepath.Join(dir, "truth.tsv")) {
		off, _ := strconv.ParseFloat(r[3], 64)
		c.truth[r[0]+"/"+r[1]] = append(c.truth[r[0]+"/"+r[1]], truthOcc{clip: r[2], offset: off, mode: r[6]})
	}
	return c
}

// measureBands fills inBand and telephone, for the accuracy benchmark's
// out-of-band columns (a second decode of every clip and of the first
// episode in every condition, which the other users of a corpus skip). A
// condition keeps nothing above 4 kHz where its first episode's energy
// from 5.5 to 9 kHz (audio.HighBand) is under 0.1 % of the clean
// rendering's: compared with clean, since a bed may have little there.
func (c *corpus) measureBands(t testing.TB) {
	c.inBand, c.telephone = map[string]float64{}, map[string]bool{}
	for _, clip := range c.clips {
		c.inBand[clip.Name] = lowShare(t, clipFile(t, c, clip.Name))
	}
	if _, ok := c.conditions["clean"]; ok && len(c.episodes) > 0 {
		clean := highEnergy(t, c.episodeFile(c.episodes[0], "clean"))
		for cond := range c.conditions {
			c.telephone[cond] = clean > 0 && highEnergy(t, c.episodeFile(c.episodes[0], cond)) < 0.001*clean
		}
	}
}

// episodeFile finds the file of a condition (the mini corpus re-encodes
// WAV as FLAC).
func (c *corpus) episodeFile(ep, cond string) string {
	f := filepath.Join(c.dir, "episodes", ep, c.conditions[cond])
	if _, err := os.Stat(f); err == nil {
		return f
	}
	base := strings.TrimSuffix(c.conditions[cond], filepath.Ext(c.conditions[cond]))
	m, _ := filepath.Glob(filepath.Join(c.dir, "episodes", ep, base+".*"))
	if len(m) > 0 {
		return m[0]
	}
	return f
}

// dump, when ARCHIVIST_LOCATE_DUMP names a file, gets a line per reported
// occurrence with its features and whether it was right (for a look at a
// tuning corpus, never at the reported ones), tab-separated: corpus,
// condition, episode, clip, clip seconds, confidence, votes, clip hashes,
// band-envelope similarity, samples' correlation, tp, fp or same (a
// clip found where another that holds its audio plays: see within), offset,
// speed, tempo, and whether the samples placed it (refined).
var dump = func() *os.File {
	if p := os.Getenv("ARCHIVIST_LOCATE_DUMP"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			return f
		}
	}
	return nil
}()

// score is the outcome of one condition.
type score struct {
	tp, fp, fn     int
	decoyHits      int
	errs           []float64 // offset errors of true hits, seconds
	hours          float64
	falseAlarms    []string
	missed         []string
	longTP, longFN int // clips of 3 s and longer
	longFP         int // reports of clips of 3 s and longer that were wrong
	sameAudio      int // hits of a clip where another clip that contains it plays
	// Occurrences of clips of 3 s and longer whose audio the condition
	// removes (outOfBand), and how many of them were found.
	oobLong, oobLongFound int
	// Recall by mix mode and by clip kind (clips of 3 s and longer, and
	// shorter ones apart), and precision by clip kind.
	byMode, byKind map[string]*tally
	fpByKind       map[string]int
}

// tally counts the occurrences found and missed of a group.
type tally struct{ tp, fn, shortTP, shortFN int }

func (s *score) count(m map[string]*tally, key string, long, found bool) {
	if m[key] == nil {
		m[key] = &tally{}
	}
	t := m[key]
	switch {
	case long && found:
		t.tp++
	case long:
		t.fn++
	case found:
		t.shortTP++
	default:
		t.shortFN++
	}
}

// add sums another corpus's score of the same condition into s.
func (s *score) add(o *score) {
	s.tp, s.fp, s.fn, s.decoyHits, s.hours = s.tp+o.tp, s.fp+o.fp, s.fn+o.fn, s.decoyHits+o.decoyHits, s.hours+o.hours
	s.errs = append(s.errs, o.errs...)
	s.falseAlarms, s.missed = append(s.falseAlarms, o.falseAlarms...), append(s.missed, o.missed...)
	s.longTP, s.longFN, s.longFP, s.sameAudio = s.longTP+o.longTP, s.longFN+o.longFN, s.longFP+o.longFP, s.sameAudio+o.sameAudio
	s.oobLong, s.oobLongFound = s.oobLong+o.oobLong, s.oobLongFound+o.oobLongFound
	for _, m := range []struct{ to, from map[string]*tally }{{s.byMode, o.byMode}, {s.byKind, o.byKind}} {
		for k, t := range m.from {
			if m.to[k] == nil {
				m.to[k] = &tally{}
			}
			m.to[k].tp, m.to[k].fn, m.to[k].shortTP, m.to[k].shortFN = m.to[k].tp+t.tp, m.to[k].fn+t.fn, m.to[k].shortTP+t.shortTP, m.to[k].shortFN+t.shortFN
		}
	}
	for k, n := range o.fpByKind {
		s.fpByKind[k] += n
	}
}

func newScore() *score {
	return &score{byMode: map[string]*tally{}, byKind: map[string]*tally{}, fpByKind: map[string]int{}}
}

// wilson is the 95 % Wilson score interval of k successes in n.
func wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	const z = 1.959964
	p, fn := float64(k)/float64(n), float64(n)
	c := (p + z*z/(2*fn)) / (1 + z*z/fn)
	h := z * math.Sqrt(p*(1-p)/fn+z*z/(4*fn*fn)) / (1 + z*z/fn)
	return max(c-h, 0), min(c+h, 1)
}

// rateCI is the exact 95 % interval of k events in hours (Poisson).
func rateCI(k int, hours float64) (lo, hi float64) {
	if k > 0 {
		lo = distuv.ChiSquared{K: float64(2 * k)}.Quantile(0.025) / 2 / hours
	}
	return lo, distuv.ChiSquared{K: float64(2*k + 2)}.Quantile(0.975) / 2 / hours
}

// prop prints k of n with its interval.
func prop(k, n int) string {
	if n == 0 {
		return "–"
	}
	lo, hi := wilson(k, n)
	return fmt.Sprintf("%.3f [%.2f, %.2f] (%d/%d)", float64(k)/float64(n), lo, hi, k, n)
}

func (s *score) precision() float64 { return float64(s.tp) / math.Max(float64(s.tp+s.fp), 1) }
func (s *score) recall() float64    { return float64(s.tp) / math.Max(float64(s.tp+s.fn), 1) }
func (s *score) longRecall() float64 {
	return float64(s.longTP) / math.Max(float64(s.longTP+s.longFN), 1)
}
func (s *score) errQ(q float64) float64 {
	if len(s.errs) == 0 {
		return math.NaN()
	}
	e := slices.Clone(s.errs)
	sort.Float64s(e)
	return e[int(q*float64(len(e)-1))]
}

// evaluate locates every clip in every episode of the condition and scores
// the occurrences.
func evaluate(t testing.TB, c *corpus, x *locate.Index, cond string, minConf float64) *score {
	s := newScore()
	for _, ep := range c.episodes {
		found, seconds := locateFile(t, x, c.episodeFile(ep, cond), minConf)
		c.score(s, ep, cond, seconds, found)
	}
	return s
}

// sameAudio reports whether o is its clip found where another clip that
// holds its audio plays (within): neither a hit nor a false alarm.
func (c *corpus) sameAudio(truth []truthOcc, o locate.Occurrence) bool {
	for _, w := range c.within[o.Name] {
		for _, tr := range truth {
			if tr.clip == w.clip && math.Abs(tr.offset+w.offset-o.Offset) <= 0.1 {
				return true
			}
		}
	}
	return false
}

// score adds to s what was found in an episode of a condition (seconds
// long): a hit is right when its clip occurs within 0.1 s of it.
func (c *corpus) score(s *score, ep, cond string, seconds float64, found []locate.Occurrence) {
	s.hours += seconds / 3600
	truth := c.truth[ep+"/"+cond]
	used := make([]bool, len(truth))
	for _, o := range found {
		if dump != nil {
			right := "fp"
			for _, tr := range truth {
				if tr.clip == o.Name && math.Abs(tr.offset-o.Offset) <= 0.1 {
					right = "tp"
				}
			}
			if right == "fp" && c.sameAudio(truth, o) {
				right = "same"
			}
			fmt.Fprintf(dump, "%s\t%s\t%s\t%s\t%.1f\t%.4f\t%d\t%d\t%.4f\t%.4f\t%s\t%.3f\t%.4f\t%.4f\t%t\n", c.dir, cond, ep, o.Name, c.duration[o.Name], o.Confidence, o.Votes, o.Hashes, o.Similarity, o.Waveform, right, o.Offset, o.Speed, o.Tempo, o.Refined)
		}
		hit := false
		for i, tr := range truth {
			if !used[i] && tr.clip == o.Name && math.Abs(tr.offset-o.Offset) <= 0.1 {
				used[i], hit = true, true
				s.errs = append(s.errs, math.Abs(tr.offset-o.Offset))
				break
			}
		}
		if !hit && c.sameAudio(truth, o) {
			s.sameAudio++
			continue
		}
		if hit {
			s.tp++
			if c.duration[o.Name] >= 3 {
				s.longTP++
			}
			continue
		}
		s.fp++
		if c.duration[o.Name] >= 3 {
			s.longFP++
		}
		s.fpByKind[c.kind[o.Name]]++
		if c.role[o.Name] == "distractor" {
			s.decoyHits++
		}
		s.falseAlarms = append(s.falseAlarms, fmt.Sprintf("%s %s %.3fs conf %.3f votes %d/%d", ep, o.Name, o.Offset, o.Confidence, o.Votes, o.Hashes))
	}
	for i, tr := range truth {
		long := c.duration[tr.clip] >= 3
		if long && c.telephone[cond] && c.inBand[tr.clip] < outOfBand {
			s.oobLong++
			if used[i] {
				s.oobLongFound++
			}
		}
		s.count(s.byMode, tr.mode, long, used[i])
		s.count(s.byKind, c.kind[tr.clip], long, used[i])
		if !used[i] {
			s.fn++
			if c.duration[tr.clip] >= 3 {
				s.longFN++
			}
			band := ""
			if c.inBand != nil {
				band = fmt.Sprintf(", %.2f %% of its energy below 4 kHz", 100*c.inBand[tr.clip])
			}
			s.missed = append(s.missed, fmt.Sprintf("%s %s at %.3fs (%.1fs long, %s%s)", ep, tr.clip, tr.offset, c.duration[tr.clip], tr.mode, band))
		}
	}
}

// audioCorpus is the shared recorded-audio material, or a skip saying what
// the test would have shown.
func audioCorpus(tb testing.TB, what string) string { return testenv.SharedData(tb, "audio", what) }

// TestMiniCorpus: in the clean, gain, 10 dB, resampled and MP3 conditions
// of testdata/audio/mini every target occurrence is found within 0.1 s and
// nothing else is reported (no decoy, no false alarm).
func TestMiniCorpus(t *testing.T) {
	c := loadCorpus(t, filepath.Join(audioCorpus(t, "the locator's accuracy on the recorded mini corpus, condition by condition"), "mini"))
	x, err := locate.NewIndex(locate.DefaultParams, c.clips)
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range []string{"clean", "gain-12", "snr10", "sr22k", "lp4k_mp3_64k"} {
		s := evaluate(t, c, x, cond, locate.Threshold)
		t.Logf("%-13s precision %.3f recall %.3f (tp %d fp %d fn %d) offset error median %.1f ms p95 %.1f ms",
			cond, s.precision(), s.recall(), s.tp, s.fp, s.fn, 1000*s.errQ(0.5), 1000*s.errQ(0.95))
		for _, m := range s.missed {
			t.Errorf("%s: missed %s", cond, m)
		}
		for _, f := range s.falseAlarms {
			t.Errorf("%s: false alarm %s", cond, f)
		}
	}
}

// reportSeeds are the seeds the accuracy benchmark reports, the first
// three whose corpus builds (make_corpus.sh fails on some seeds inside
// sox: "fade-out overlaps fade-in"; such a seed is skipped, saying so):
// seeds never looked at while tuning. The locator was tuned on SEED=2,
// SEED=3 (the verification threshold, on its 8-episode build), SEED=5 (the
// high band), SEED=6 to 9 (false alarms at +2 % speed), SEED=21 to 32 (the
// samples placing a repeating clip; clean and +2 % speed for 21-24, +2 %
// speed and MP3 for 25-32, SEED=27 does not build; 21-26 in every
// condition for the rule on samples that do not correlate and the gate of
// the samples' comparison) and the mini corpus (SEED=1); those are never
// reported.
var reportSeeds = []string{"11", "12", "13", "14", "15", "16", "17", "18", "19", "20"}

// accuracyCorpora are the corpora the accuracy benchmark scores:
// ARCHIVIST_AUDIO_CORPUS if set (make_corpus.sh outputs, separated as
// PATH is), else three of ARCHIVIST_AUDIO_SEEDS (default reportSeeds) with
// ARCHIVIST_AUDIO_EPISODES episodes of 5-10 minutes (default 8), built now
// with make_corpus.sh (its header lists the Debian packages it needs), or
// taken from ARCHIVIST_AUDIO_CORPUS_CACHE where an earlier run built it.
func accuracyCorpora(b *testing.B) []string {
	if v := os.Getenv("ARCHIVIST_AUDIO_CORPUS"); v != "" {
		return filepath.SplitList(v)
	}
	seeds := reportSeeds
	if v := os.Getenv("ARCHIVIST_AUDIO_SEEDS"); v != "" {
		seeds = strings.Split(v, ",")
	}
	n := "8"
	if v := os.Getenv("ARCHIVIST_AUDIO_EPISODES"); v != "" {
		n = v
	}
	cache := os.Getenv("ARCHIVIST_AUDIO_CORPUS_CACHE")
	if cache == "" {
		cache = b.TempDir()
	}
	script := filepath.Join(audioCorpus(b, "the locator's accuracy and speed on corpora made by the shared generator"), "make_corpus.sh")
	var dirs []string
	for _, seed := range seeds {
		if len(dirs) == 3 {
			break
		}
		out := filepath.Join(cache, "seed"+seed+"-n"+n)
		failed := filepath.Join(cache, "seed"+seed+"-n"+n+".failed")
		if _, err := os.Stat(failed); err == nil {
			fmt.Printf("SEED=%s skipped: make_corpus.sh failed on it before (%s)\n", seed, failed)
			continue
		}
		if _, err := os.Stat(filepath.Join(out, "pairs.tsv")); err != nil {
			_ = os.RemoveAll(out)
			cmd := exec.Command("bash", script)
			cmd.Env = append(os.Environ(), "N="+n, "MIN_S=300", "MAX_S=600", "SEED="+seed, "OUT="+out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				if _, serr := os.Stat(filepath.Join(out, "clips.tsv")); serr != nil {
					b.Fatalf("make_corpus.sh SEED=%s (see its header for the Debian packages it needs): %v\n%s", seed, err, msg)
				}
				// The script ran and one of its episodes failed inside sox.
				_ = os.RemoveAll(out)
				_ = os.WriteFile(failed, msg, 0o644)
				fmt.Printf("SEED=%s skipped: make_corpus.sh failed on it (%v; its output in %s)\n", seed, err, failed)
				continue
			}
		}
		deriveTimeConditions(b, out)
		dirs = append(dirs, out)
	}
	if len(dirs) == 0 {
		b.Fatal("no corpus could be built")
	}
	return dirs
}

// timeConditions are the conditions of a changed time that the accuracy
// benchmark adds to a corpus built by make_corpus.sh (which has +2 %
// speed alone): each episode's clean rendering played 10 % and 5 % slow
// and fast (sox's speed: pitch and tempo together, as a tape transferred
// fast or slow), and its tempo changed as much with the pitch kept (sox's
// tempo, WSOLA: as a broadcaster's time compression to fit a slot).
var timeConditions = []struct {
	name, effect string
	factor       float64
}{
	{"speed090", "speed", 0.90}, {"speed095", "speed", 0.95}, {"speed105", "speed", 1.05}, {"speed110", "speed", 1.10},
	{"tempo090", "tempo", 0.90}, {"tempo095", "tempo", 0.95}, {"tempo105", "tempo", 1.05}, {"tempo110", "tempo", 1.10},
}

// deriveTimeConditions adds timeConditions to the corpus in dir where it
// lacks them: the episodes' files by sox, their truth the clean
// rendering's with every offset divided by the factor, and last the
// condition's row (so a condition cut short is made again).
func deriveTimeConditions(b *testing.B, dir string) {
	have := map[string]bool{}
	for _, r := range readTSV(b, filepath.Join(dir, "conditions.tsv")) {
		have[r[0]] = true
	}
	clean := [][]string{}
	for _, r := range readTSV(b, filepath.Join(dir, "truth.tsv")) {
		if r[1] == "clean" {
			clean = append(clean, r)
		}
	}
	eps, err := os.ReadDir(filepath.Join(dir, "episodes"))
	if err != nil {
		b.Fatal(err)
	}
	appendTo := func(name, text string) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(text)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range timeConditions {
		if have[tc.name] {
			continue
		}
		for _, ep := range eps {
			in, out := filepath.Join(dir, "episodes", ep.Name(), "clean.wav"), filepath.Join(dir, "episodes", ep.Name(), tc.name+".wav")
			args := []string{"-R", "-V1", in, out, tc.effect, strconv.FormatFloat(tc.factor, 'f', -1, 64)}
			if tc.effect == "speed" {
				args = append(args, "rate", "44100")
			}
			if msg, err := exec.Command("sox", args...).CombinedOutput(); err != nil {
				b.Fatalf("sox %s (Debian's sox): %v\n%s", strings.Join(args, " "), err, msg)
			}
		}
		var truth strings.Builder
		for _, r := range clean {
			off, _ := strconv.ParseFloat(r[3], 64)
			dur, _ := strconv.ParseFloat(r[4], 64)
			row := slices.Clone(r)
			row[1], row[3], row[4] = tc.name, strconv.FormatFloat(off/tc.factor, 'f', 6, 64), strconv.FormatFloat(dur/tc.factor, 'f', 6, 64)
			truth.WriteString(strings.Join(row, "\t") + "\n")
		}
		appendTo("truth.tsv", truth.String())
		pitch := "pitch and tempo"
		if tc.effect == "tempo" {
			pitch = "tempo alone, pitch kept"
		}
		appendTo("conditions.tsv", fmt.Sprintf("%s\t%s.wav\t44100\t%.10f\t%s × %g (%s, sox %s); offsets scaled\n", tc.name, tc.name, 1/tc.factor, tc.effect, tc.factor, pitch, tc.effect))
	}
}

// setParams sets the integer fields of p that ARCHIVIST_LOCATE_PARAMS
// names ("PeaksPerFrame=7,FanOut=8"): to compare settings on a tuning
// corpus.
func setParams(b *testing.B, p *locate.Params) {
	v := os.Getenv("ARCHIVIST_LOCATE_PARAMS")
	if v == "" {
		return
	}
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(val)
		f := reflect.ValueOf(p).Elem().FieldByName(k)
		if err != nil || !f.IsValid() || f.Kind() != reflect.Int {
			b.Fatalf("ARCHIVIST_LOCATE_PARAMS: %q is not an integer setting of locate.Params", kv)
		}
		f.SetInt(int64(n))
	}
	fmt.Printf("settings: %+v\n", *p)
}

// BenchmarkAccuracy scores the locator on corpora of seeds it was never
// tuned on (accuracyCorpora): per condition, recall of clips of 3 s and
// longer and of shorter ones, precision and false alarms an hour, each
// with its 95 % interval (Wilson; exact Poisson for the rate), offset
// error, the occurrences of clips ≥3 s the condition removes (outOfBand)
// and recall ≥3 s without them; then recall by mix mode (replace, duck,
// overlay) and by clip kind (music, sfx, speech), and precision by kind.
// docs/PERFORMANCE.md keeps the tables.
//
//	go test -run '^$' -bench Accuracy -benchtime 1x -timeout 3h ./locate/
func BenchmarkAccuracy(b *testing.B) {
	conds := []string{"clean", "gain-12", "sr22k", "lp4k_mp3_64k", "snr10", "snr5", "snr0", "gsm8k", "speed102"}
	for _, tc := range timeConditions {
		conds = append(conds, tc.name)
	}
	if v := os.Getenv("ARCHIVIST_LOCATE_CONDITIONS"); v != "" { // a look at some
		conds = strings.Split(v, ",")
	}
	for range b.N {
		total := map[string]*score{}
		var hours float64
		var dirs []string
		params := locate.DefaultParams
		if v := os.Getenv("ARCHIVIST_LOCATE_SPEEDS"); v != "" { // to compare settings
			params.Speeds = nil
			for _, f := range strings.Split(v, ",") {
				sp, err := strconv.ParseFloat(f, 64)
				if err != nil {
					b.Fatalf("ARCHIVIST_LOCATE_SPEEDS: %v", err)
				}
				if sp != 1 {
					params.Speeds = append(params.Speeds, sp)
				}
			}
		}
		setParams(b, &params)
		minConf := locate.Threshold
		if v := os.Getenv("ARCHIVIST_LOCATE_MIN_CONFIDENCE"); v != "" { // with ARCHIVIST_LOCATE_DUMP, on a tuning corpus
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("ARCHIVIST_LOCATE_MIN_CONFIDENCE: %v", err)
			}
			minConf = f
		}
		for _, dir := range accuracyCorpora(b) {
			c := loadCorpus(b, dir)
			x, err := locate.NewIndex(params, c.clips)
			if err != nil {
				b.Fatal(err)
			}
			c.findWithin(x)
			c.measureBands(b)
			for a, ws := range c.within {
				for _, w := range ws {
					fmt.Printf("%s: clip %s is found inside clip %s at %.3f s: a hit of %s where %s plays is counted as same-audio, not as a false alarm\n", dir, a, w.clip, w.offset, a, w.clip)
				}
			}
			for _, clip := range slices.Sorted(maps.Keys(c.inBand)) {
				if c.inBand[clip] < 10*outOfBand {
					fmt.Printf("%s: clip %s (%.1f s) has %.2f %% of its energy below 4 kHz\n", dir, clip, c.duration[clip], 100*c.inBand[clip])
				}
			}
			for _, cond := range slices.Sorted(maps.Keys(c.telephone)) {
				if c.telephone[cond] {
					fmt.Printf("%s: %s keeps nothing above 4 kHz (its occurrences of clips under %.0f %% below it are out of band)\n", dir, cond, 100*outOfBand)
				}
			}
			for _, cond := range conds {
				if _, ok := c.conditions[cond]; !ok {
					continue
				}
				s := evaluate(b, c, x, cond, minConf)
				if total[cond] == nil {
					total[cond] = newScore()
				}
				total[cond].add(s)
				if cond == "clean" {
					hours += s.hours
				}
			}
			dirs = append(dirs, filepath.Base(dir))
		}
		var out strings.Builder
		fmt.Fprintf(&out, "\n%s: %.2f hours of episodes per condition; speed variants %v\n", strings.Join(dirs, ", "), hours, params.Speeds)
		fmt.Fprintf(&out, "\n| condition | recall ≥3 s | recall <3 s | precision ≥3 s | precision | false alarms/h | offset median | p95 | decoy hits | same-audio | ≥3 s out of band (found) | recall ≥3 s in band |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, cond := range conds {
			s := total[cond]
			if s == nil {
				continue
			}
			lo, hi := rateCI(s.fp, s.hours)
			fmt.Fprintf(&out, "| %s | %s | %s | %s | %s | %.2f [%.2f, %.2f] | %.1f ms | %.1f ms | %d | %d | %d (%d) | %s |\n", cond,
				prop(s.longTP, s.longTP+s.longFN), prop(s.tp-s.longTP, s.tp-s.longTP+s.fn-s.longFN), prop(s.longTP, s.longTP+s.longFP), prop(s.tp, s.tp+s.fp),
				float64(s.fp)/s.hours, lo, hi, 1000*s.errQ(0.5), 1000*s.errQ(0.95), s.decoyHits, s.sameAudio,
				s.oobLong, s.oobLongFound, prop(s.longTP-s.oobLongFound, s.longTP+s.longFN-s.oobLong))
		}
		groups := func(title string, get func(*score) map[string]*tally) {
			keys := map[string]bool{}
			for _, s := range total {
				for k := range get(s) {
					keys[k] = true
				}
			}
			names := slices.Sorted(maps.Keys(keys))
			fmt.Fprintf(&out, "\nRecall ≥3 s (and <3 s) by %s\n\n| condition | %s |\n|%s\n", title, strings.Join(names, " | "), strings.Repeat(" --- |", len(names)+1))
			for _, cond := range conds {
				s := total[cond]
				if s == nil {
					continue
				}
				row := []string{cond}
				for _, k := range names {
					t := get(s)[k]
					if t == nil {
						t = &tally{}
					}
					row = append(row, prop(t.tp, t.tp+t.fn)+"; <3 s "+prop(t.shortTP, t.shortTP+t.shortFN))
				}
				fmt.Fprintf(&out, "| %s |\n", strings.Join(row, " | "))
			}
		}
		groups("mix mode", func(s *score) map[string]*tally { return s.byMode })
		groups("clip kind", func(s *score) map[string]*tally { return s.byKind })
		fmt.Fprintf(&out, "\nFalse alarms by the reported clip's kind\n\n| condition | music | sfx | speech |\n| --- | --- | --- | --- |\n")
		for _, cond := range conds {
			if s := total[cond]; s != nil {
				fmt.Fprintf(&out, "| %s | %d | %d | %d |\n", cond, s.fpByKind["music"], s.fpByKind["sfx"], s.fpByKind["speech"])
			}
		}
		if os.Getenv("ARCHIVIST_LOCATE_VERBOSE") != "" {
			for _, cond := range conds {
				if s := total[cond]; s != nil {
					for _, m := range s.missed {
						fmt.Fprintf(&out, "    %s missed %s\n", cond, m)
					}
					for _, f := range s.falseAlarms {
						fmt.Fprintf(&out, "    %s false alarm %s\n", cond, f)
					}
				}
			}
		}
		fmt.Print(out.String())
	}
}

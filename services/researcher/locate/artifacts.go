package locate

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/archivist/archivist/services/researcher/artifact"
	"github.com/archivist/archivist/services/researcher/researcher"
)

// printVersion names the analysis prints come from: bump it whenever the
// fingerprinter, the print's format or anything a print holds changes
// meaning. With a digest of Params it is part of every artifact key, so
// a change of algorithm or settings computes every print again.
const printVersion = 2

// KeepArtifacts implements researcher.ArtifactKeeper.
func (l *Locator) KeepArtifacts(c *artifact.Cache, log *slog.Logger) { l.Artifacts, l.Log = c, log }

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// analysis names the analysis in artifact keys: printVersion and a
// digest of Params.
func (l *Locator) analysis() string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d %#v", printVersion, l.Params))
	return fmt.Sprintf("v%d-%x", printVersion, h[:6])
}

// digest names a's bytes (researcher.Audio.Digest, else its declared
// sha256): "" where nothing names them, or naming them failed (opening
// the audio then says what is wrong).
func (l *Locator) digest(ctx context.Context, a researcher.Audio) string {
	d := a.Ref.Media.SHA256
	if a.Digest != nil {
		var err error
		if d, err = a.Digest(ctx); err != nil {
			l.log().DebugContext(ctx, "audio unnamed: its prints are not kept", "audio", a.Ref.Key, "err", err)
			return ""
		}
	}
	if !sha256Hex.MatchString(d) {
		return ""
	}
	return strings.ToLower(d)
}

// prefix is where the prints of a's audio by this analysis are kept, with
// the digest that names its bytes; false where they are not kept (no
// Artifacts, nothing names the bytes).
func (l *Locator) prefix(ctx context.Context, a researcher.Audio) (prefix, digest string, keep bool) {
	if l.Artifacts == nil {
		return "", "", false
	}
	if digest = l.digest(ctx, a); digest == "" {
		return "", "", false
	}
	return artifact.MediaPrefix(digest) + "locate/" + l.analysis() + "/", digest, true
}

// unchanged tells whether a's bytes are still the ones digest named when
// their analysis began: what was derived from bytes replaced meanwhile is
// not kept under the old name.
func (l *Locator) unchanged(ctx context.Context, a researcher.Audio, digest string) bool {
	if l.digest(ctx, a) == digest {
		return true
	}
	l.log().WarnContext(ctx, "audio replaced while it was analysed: its prints are not kept", "audio", a.Ref.Key)
	return false
}

func (l *Locator) log() *slog.Logger {
	if l.Log == nil {
		return slog.Default()
	}
	return l.Log
}

// clipPrint is a's print: kept, or computed (and kept).
func (l *Locator) clipPrint(ctx context.Context, a researcher.Audio) (*ClipPrint, error) {
	prefix, digest, keep := l.prefix(ctx, a)
	key := prefix + "clip"
	if keep {
		cp, err := l.openClipPrint(ctx, key)
		if err == nil {
			if err := check(ctx, a); err != nil {
				return nil, err
			}
			cp.Name = a.Ref.Key
			return cp, nil
		}
		if !errors.Is(err, artifact.ErrNotFound) {
			l.log().WarnContext(ctx, "clip print unreadable; computed again", "clip", a.Ref.Key, "artifact", key, "err", err)
			if derr := l.Artifacts.Discard(ctx, key); derr != nil {
				l.log().WarnContext(ctx, "discard clip print", "artifact", key, "err", derr)
			}
		}
	}
	clip, err := l.readClip(ctx, a)
	if err != nil {
		return nil, err
	}
	cp, err := PrintClip(l.Params, clip)
	if err != nil {
		return nil, err
	}
	if keep && l.unchanged(ctx, a, digest) {
		l.keepClipPrint(ctx, key, cp)
	}
	return cp, nil
}

func (l *Locator) openClipPrint(ctx context.Context, key string) (*ClipPrint, error) {
	f, err := l.Artifacts.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Size() > maxClipPrint {
		return nil, fmt.Errorf("%w: a clip print of %d bytes, more than a clip makes", errClipPrint, f.Size())
	}
	b, err := f.Bytes()
	if err != nil {
		return nil, err
	}
	cp := &ClipPrint{}
	if err := cp.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	if len(cp.Low) != l.Params.variants() {
		return nil, fmt.Errorf("%w: %d variants, the parameters make %d", errClipPrint, len(cp.Low), l.Params.variants())
	}
	if n := cp.longest(); n > maxClipSeconds*l.Params.Rate {
		return nil, fmt.Errorf("%w: a variant of %d samples, longer than a clip", errClipPrint, n)
	}
	return cp, nil
}

// maxClipPrint bounds a clip print read whole: a clip of the longest
// (maxClipSeconds), its samples at six variants and its landmarks, fit
// in a quarter of it (a print written now keeps its samples as it is
// only, MarshalBinary).
const maxClipPrint = 256 << 20

func (l *Locator) keepClipPrint(ctx context.Context, key string, cp *ClipPrint) {
	b, _ := cp.MarshalBinary()
	w, err := l.Artifacts.Create(key)
	if err == nil {
		if _, err = w.Write(b); err != nil {
			w.Abort()
		} else {
			err = w.Commit(ctx, nil)
		}
	}
	if err != nil {
		l.log().WarnContext(ctx, "keep clip print", "artifact", key, "err", err)
	}
}

// printMeta is what an episode's print says of itself.
type printMeta struct {
	PrintInfo
	// Rate is the episode's own sample rate: a high band exists from
	// 16 kHz.
	Rate int `json:"rate"`
}

// hasHighBand tells whether audio of this rate has a band above the
// analysed one (audio.HighBand): from 16 kHz (ReadClip, Matcher.Stream,
// and whether a kept episode has a high-band print).
func hasHighBand(rate int) bool { return rate >= 16000 }

// keptPrint is an episode's print of one band, open for replay.
type keptPrint struct {
	prints, samples *artifact.File
	meta            printMeta
}

func (k *keptPrint) print() *Print {
	if k == nil {
		return nil
	}
	return &Print{Prints: k.prints.Reader(), Samples: k.samples, Info: k.meta.PrintInfo}
}

func (k *keptPrint) close() {
	if k != nil {
		k.prints.Close()
		k.samples.Close()
	}
}

// openPrint opens the print of one band kept under key (ErrNotFound
// where either part is missing).
func (l *Locator) openPrint(ctx context.Context, key string) (*keptPrint, error) {
	p, err := l.Artifacts.Open(ctx, key+".print")
	if err != nil {
		return nil, err
	}
	s, err := l.Artifacts.Open(ctx, key+".samples")
	if err != nil {
		p.Close()
		return nil, err
	}
	k := &keptPrint{prints: p, samples: s}
	if err := json.Unmarshal(p.Meta(), &k.meta); err != nil || s.Size() != adpcmBytes(k.meta.Samples) || k.meta.Frames < 0 || k.meta.Hashes < 0 {
		k.close()
		return nil, fmt.Errorf("%w: print %s: %d bytes of samples for %d samples (%v)", artifact.ErrCorrupt, key, s.Size(), k.meta.Samples, err)
	}
	return k, nil
}

// search finds x's clips in the episode: by replaying its kept print, or
// by streaming it, keeping what it records.
func (l *Locator) search(ctx context.Context, a researcher.Audio, x *Index, explain bool) ([]Occurrence, []Miss, error) {
	prefix, digest, keep := l.prefix(ctx, a)
	if !keep {
		occ, misses, _, err := l.stream(ctx, a, x, explain, nil)
		return occ, misses, err
	}
	low, err := l.openPrint(ctx, prefix+"low")
	l.unreadable(ctx, prefix+"low", err)
	var high *keptPrint
	if low != nil && x.HighBand() && hasHighBand(low.meta.Rate) {
		high, err = l.openPrint(ctx, prefix+"high")
		l.unreadable(ctx, prefix+"high", err)
	}
	if low != nil && (high != nil || !x.HighBand() || !hasHighBand(low.meta.Rate)) {
		if err := check(ctx, a); err != nil {
			low.close()
			high.close()
			return nil, nil, err
		}
		m := l.matcher(x, explain)
		err := m.Replay(ctx, low.print(), high.print())
		low.close()
		high.close()
		if err == nil {
			occ, misses := finish(m)
			return occ, misses, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		l.log().WarnContext(ctx, "episode print unreadable; the episode is analysed again", "episode", a.Ref.Key, "artifact", prefix, "err", err)
		for _, band := range []string{"low", "high"} {
			l.discard(ctx, prefix+band)
		}
		low, high = nil, nil
	}
	rec := &recorder{}
	if low == nil {
		rec.low = l.createBand(prefix + "low")
	}
	if high == nil && x.HighBand() {
		rec.high = l.createBand(prefix + "high")
	}
	low.close()
	high.close()
	occ, misses, rate, err := l.stream(ctx, a, x, explain, rec)
	if err != nil {
		rec.low.abort()
		rec.high.abort()
		return nil, nil, err
	}
	if !l.unchanged(ctx, a, digest) {
		rec.low.abort()
		rec.high.abort()
		return occ, misses, nil
	}
	l.commit(ctx, rec.low, rate)
	if hasHighBand(rate) {
		l.commit(ctx, rec.high, rate)
	} else {
		rec.high.abort()
	}
	return occ, misses, nil
}

// unreadable discards a print that is there but cannot be read.
func (l *Locator) unreadable(ctx context.Context, key string, err error) {
	if err != nil && !errors.Is(err, artifact.ErrNotFound) {
		l.log().WarnContext(ctx, "episode print unreadable; computed again", "artifact", key, "err", err)
		l.discard(ctx, key)
	}
}

func (l *Locator) discard(ctx context.Context, key string) {
	for _, k := range []string{key + ".print", key + ".samples"} {
		if err := l.Artifacts.Discard(ctx, k); err != nil {
			l.log().WarnContext(ctx, "discard episode print", "artifact", k, "err", err)
		}
	}
}

// recorder records the prints of an episode's bands (nil: not that band).
type recorder struct {
	low, high *bandWriter
}

// bandWriter writes one band's print and samples as artifacts.
type bandWriter struct {
	key             string
	prints, samples *artifact.Writer
	w               *PrintWriter
}

func (l *Locator) createBand(key string) *bandWriter {
	p, err := l.Artifacts.Create(key + ".print")
	if err != nil {
		l.log().Warn("record episode print", "artifact", key, "err", err)
		return nil
	}
	s, err := l.Artifacts.Create(key + ".samples")
	if err != nil {
		p.Abort()
		l.log().Warn("record episode print", "artifact", key, "err", err)
		return nil
	}
	return &bandWriter{key: key, prints: p, samples: s, w: NewPrintWriter(p, s)}
}

func (b *bandWriter) writer() *PrintWriter {
	if b == nil {
		return nil
	}
	return b.w
}

func (b *bandWriter) abort() {
	if b != nil {
		b.prints.Abort()
		b.samples.Abort()
	}
}

// commit keeps a recorded band: its samples first, so that a print kept
// always has them.
func (l *Locator) commit(ctx context.Context, b *bandWriter, rate int) {
	if b == nil {
		return
	}
	info, err := b.w.Close()
	if err != nil {
		b.abort()
		l.log().WarnContext(ctx, "record episode print", "artifact", b.key, "err", err)
		return
	}
	meta, _ := json.Marshal(printMeta{PrintInfo: info, Rate: rate})
	if err := b.samples.Commit(ctx, meta); err != nil {
		b.prints.Abort()
		l.log().WarnContext(ctx, "keep episode samples", "artifact", b.key, "err", err)
		return
	}
	if err := b.prints.Commit(ctx, meta); err != nil {
		l.log().WarnContext(ctx, "keep episode print", "artifact", b.key, "err", err)
	}
}

// check asks whether a's audio is still there and still its bytes
// (researcher.Audio.Check) before what was derived from it is used.
func check(ctx context.Context, a researcher.Audio) error {
	if a.Check == nil {
		return nil
	}
	return a.Check(ctx)
}

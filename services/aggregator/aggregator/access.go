package aggregator

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archivist/archivist/pkg/httpauth"
)

// Access points: the index read by a Wayback front end, open to the
// public, under rules of its own. GET /{name}/cdx answers the CDX API
// without a key, for the access point's view: captures younger than its
// embargo hidden, its own exclusions applied beside the takedowns (the
// exclusions of no access point, which every answer applies, staff's
// too), each client address held to its rate. GET /cdx is staff's view,
// with a reader's key: everything but the takedowns.

// AccessPoint is a named, open view of the index.
type AccessPoint struct {
	// Name is the path the view is served at: GET /NAME/cdx.
	Name string
	// EmbargoDays hides captures younger than this many days (0: none).
	EmbargoDays int
	// Rate bounds each client address's queries a second (0: unbounded),
	// with bursts of Burst.
	Rate  float64
	Burst int
}

// AccessPoints are the access points, as AGGREGATOR_ACCESS_POINTS names
// them: comma-separated, each NAME and, as needed, ":embargo=DAYS",
// ":rate=QUERIES_A_SECOND", ":burst=N" ("public:embargo=365:rate=10").
type AccessPoints []AccessPoint

var accessPointName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// EnvDecode reads AGGREGATOR_ACCESS_POINTS.
func (ps *AccessPoints) EnvDecode(s string) error {
	*ps = nil
	for _, spec := range strings.Split(s, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		parts := strings.Split(spec, ":")
		p := AccessPoint{Name: parts[0]}
		if !accessPointName.MatchString(p.Name) || p.Name == "v1" {
			return fmt.Errorf("access point %q: a name of lower-case letters, digits and '-' (not v1), then :embargo=DAYS, :rate=N, :burst=N", p.Name)
		}
		if slices.ContainsFunc(*ps, func(q AccessPoint) bool { return q.Name == p.Name }) {
			return fmt.Errorf("access point %q named twice", p.Name)
		}
		for _, opt := range parts[1:] {
			k, v, _ := strings.Cut(opt, "=")
			var err error
			switch k {
			case "embargo":
				p.EmbargoDays, err = strconv.Atoi(v)
				if err == nil && p.EmbargoDays < 0 {
					err = fmt.Errorf("negative")
				}
			case "rate":
				p.Rate, err = strconv.ParseFloat(v, 64)
				if err == nil && p.Rate < 0 {
					err = fmt.Errorf("negative")
				}
			case "burst":
				p.Burst, err = strconv.Atoi(v)
				if err == nil && p.Burst < 1 {
					err = fmt.Errorf("at least 1")
				}
			default:
				err = fmt.Errorf("unknown: embargo=DAYS, rate=N or burst=N")
			}
			if err != nil {
				return fmt.Errorf("access point %s: %q: %v", p.Name, opt, err)
			}
		}
		if p.Burst == 0 {
			p.Burst = max(1, int(2*p.Rate))
		}
		*ps = append(*ps, p)
	}
	return nil
}

// point is an access point with its clients' rate limits.
type point struct {
	AccessPoint
	limits *httpauth.RateLimits
}

// points makes the access points' views.
func points(ps AccessPoints) map[string]*point {
	out := map[string]*point{}
	for _, p := range ps {
		out[p.Name] = &point{AccessPoint: p, limits: httpauth.NewRateLimits(p.Rate, p.Burst)}
	}
	return out
}

// embargoTo bounds a query's To so that captures younger than the
// embargo, as of now, are left out (to itself without an embargo).
func (p *point) embargoTo(to string, now time.Time) string {
	if p == nil || p.EmbargoDays == 0 {
		return to
	}
	cut := now.AddDate(0, 0, -p.EmbargoDays).UTC().Format("20060102150405")
	// To is a prefix: its last moment is the prefix padded with nines.
	if to == "" || pad14(to, '9') > cut {
		return cut
	}
	return to
}

// pointNames says which access points there are.
func (a *Aggregator) pointNames() string {
	names := make([]string, 0, len(a.points))
	for n := range a.points {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "there are no access points (AGGREGATOR_ACCESS_POINTS)"
	}
	return "the access points are " + strings.Join(names, ", ") + " (AGGREGATOR_ACCESS_POINTS)"
}

// pointCDX serves GET /{point}/cdx: the access point's view, without a
// key, each client address held to its rate.
func (a *Aggregator) pointCDX(w http.ResponseWriter, r *http.Request) {
	p, ok := a.points[r.PathValue("point")]
	if !ok {
		http.Error(w, fmt.Sprintf("no access point %q: %s; staff's view is /cdx, with a key", r.PathValue("point"), a.pointNames()), http.StatusNotFound)
		return
	}
	client := httpauth.ClientHost(r)
	if ok, wait := p.limits.Allow(client); !ok {
		httpauth.WriteTooMany(w, fmt.Sprintf("%s sends more queries than the access point %s allows (%g a second, bursts of %d): retry after the Retry-After seconds", client, p.Name, p.Rate, p.Burst), wait)
		return
	}
	a.query(w, r, p)
}

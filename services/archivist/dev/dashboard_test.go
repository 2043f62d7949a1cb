package dev_test

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/archivist/archivist/devkit/testenv"
)

// screenshotTo, set, is where TestDashboardInABrowser writes its
// screenshot (docs/dashboard.png for the docs:
// go test ./services/archivist/dev -run Dashboard -screenshot ../../../docs/dashboard.png).
var screenshotTo = flag.String("screenshot", "", "write the dashboard's screenshot to this file")

// chromium finds a Chromium (or Chrome) to drive: CHROMIUM names one, else
// the usual names on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Skip(t, "no Chromium on this machine (apt-get install chromium; .ci/run installs it where Debian's packages are reached), so the dashboard's browser test cannot run")
	return ""
}

// TestDashboardInABrowser: `archivist dev --demo`, and a person in headless
// Chromium: the dashboard sends them to sign in, takes the key archivist
// dev wrote, then shows every pipeline with non-zero counts once the demo
// has run, and keeps them live (the panels refresh); a click on a batch
// opens its history (its transitions, each with who made it). A screenshot
// is written.
func TestDashboardInABrowser(t *testing.T) {
	browser := chromium(t)
	o := devOptions(t)
	o.Demo = true
	stop, out := runDev(t, o)
	defer stop()
	token, err := os.ReadFile(filepath.Join(o.DataDir, "api.token"))
	if err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.WindowSize(1440, 1100),
		chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	base := "http://" + o.DashboardAddr
	// Signing in: the page sends an unknown visitor to the login form; a
	// wrong key is refused there, the right one lets them in.
	var loginURL, refused string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#key", chromedp.ByID),
		chromedp.Location(&loginURL),
		chromedp.SendKeys("#key", "ak_not-a-key", chromedp.ByID),
		chromedp.Click("#sign-in", chromedp.ByID),
		chromedp.WaitVisible("#login-error", chromedp.ByID),
		chromedp.Text("#login-error", &refused, chromedp.ByID),
		chromedp.SendKeys("#key", strings.TrimSpace(string(token)), chromedp.ByID),
		chromedp.Click("#sign-in", chromedp.ByID),
		chromedp.WaitVisible("#research", chromedp.ByID),
	); err != nil {
		t.Fatalf("signing in: %v\n%s", err, out)
	}
	if !strings.Contains(loginURL, "/login") || !strings.Contains(refused, "not known") {
		t.Errorf("login page %q, refusal %q", loginURL, refused)
	}
	// Under its nonce-based Content-Security-Policy the page's own style
	// applies (and its script runs: the counts below come in by refresh).
	var bg string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`getComputedStyle(document.querySelector('header')).backgroundColor`, &bg)); err != nil || bg == "" || bg == "rgba(0, 0, 0, 0)" {
		t.Errorf("the page's style under its CSP: header background %q %v", bg, err)
	}

	// Every pipeline moves: the counts come in as the page refreshes
	// itself (no reload here).
	counts := map[string]string{
		"research-complete":       "#research-complete",
		"ingest-batches-complete": "#ingest-batches-completed",
		"ingest-jobs-complete":    "#ingest-jobs-completed",
		"index-indexed":           "#index-indexed",
		"audit-checked":           "#audit-checked",
		"curation-episodes":       "#curation-records-episode-http",
	}
	deadline := time.Now().Add(2 * time.Minute)
	seen := map[string]int{}
	for {
		missing := []string{}
		for name, sel := range counts {
			var n int
			var text string
			var nodes int
			_ = chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll(`+strconv.Quote(sel)+`).length`, &nodes))
			if nodes == 1 {
				if err := chromedp.Run(ctx, chromedp.Text(sel, &text, chromedp.ByQuery)); err == nil {
					n, _ = strconv.Atoi(strings.TrimSpace(text))
				}
			}
			seen[name] = n
			if n == 0 {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var panels string
			_ = chromedp.Run(ctx, chromedp.Text("#panels", &panels, chromedp.ByID))
			t.Fatalf("after 2 minutes, still zero: %v (seen %v)\npage: %s\n%s", missing, seen, panels, out)
		}
		time.Sleep(time.Second)
	}
	var errs int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('#panels .err').length`, &errs)); err != nil || errs != 0 {
		var panels string
		_ = chromedp.Run(ctx, chromedp.Text("#panels", &panels, chromedp.ByID))
		t.Errorf("a panel shows an error (%d, %v): %s", errs, err, panels)
	}
	var shot []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&shot, 100)); err != nil {
		t.Fatal(err)
	}
	file := *screenshotTo
	if file == "" {
		file = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard: %v; screenshot %s (%d bytes)", seen, file, len(shot))

	// An item's history: the newest batch, clicked.
	var state, events, url string
	if err := chromedp.Run(ctx,
		chromedp.Click("a.batch", chromedp.ByQuery),
		chromedp.WaitVisible("#history", chromedp.ByID),
		chromedp.Location(&url),
		chromedp.Text("#item-state", &state, chromedp.ByID),
		chromedp.Text("#events", &events, chromedp.ByID),
	); err != nil {
		t.Fatalf("a batch's history: %v", err)
	}
	if !strings.Contains(url, "kind=batch") || state != "completed" || !strings.Contains(events, "pending → processing") || !strings.Contains(events, "by daemon") {
		t.Errorf("batch history at %s: state %q, events %q", url, state, events)
	}
	// The console (#50): a batch whose payload is gone fails (its job,
	// then the batch); the work page finds both by state and collection,
	// counts a retry of both, and the confirmed retry is in the action
	// log. A screenshot of the console is written beside the page's.
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	ops := demoAPI{t: t, token: strings.TrimSpace(string(token))}
	if code := ops.call("POST", "http://"+o.CuratorAddr+"/v1/batches", map[string]string{"submitter": "demo", "profile": "maps", "type": "file",
		"payload_url": gone.URL + "/gone.tif"}, nil); code != http.StatusCreated {
		t.Fatalf("a batch to fail: %d", code)
	}
	var items, counted, acted, logged string
	ops.waitFor("the job failed", func() bool {
		var p struct{ Items []any }
		return ops.call("GET", "http://"+o.CuratorAddr+"/v1/work?kind=job&state=failed&collection=maps", nil, &p) == http.StatusOK && len(p.Items) == 1
	})
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#research", chromedp.ByID),
		chromedp.Click("#work-link", chromedp.ByID),
		chromedp.WaitVisible("#work-filter", chromedp.ByID),
		chromedp.SendKeys(`input[name="state"]`, "failed", chromedp.ByQuery),
		chromedp.SendKeys(`input[name="collection"]`, "maps", chromedp.ByQuery),
		chromedp.Click("#find", chromedp.ByID),
		chromedp.WaitVisible("#work-bulk", chromedp.ByID),
		chromedp.Text("#work-items", &items, chromedp.ByID),
		chromedp.SetValue("#work-verb", "retry", chromedp.ByID),
		chromedp.Click("#work-dry-run", chromedp.ByID),
		chromedp.WaitVisible("#work-count-n", chromedp.ByID),
		chromedp.Text("#work-count-n", &counted, chromedp.ByID),
	); err != nil {
		t.Fatalf("the console's search and dry run: %v", err)
	}
	var console []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&console, 100),
		chromedp.Click("#work-confirm", chromedp.ByID),
		chromedp.WaitVisible("#work-acted", chromedp.ByID),
		chromedp.Text("#work-acted", &acted, chromedp.ByID),
		chromedp.Navigate(base+"/work/actions"),
		chromedp.WaitVisible("#action-log", chromedp.ByID),
		chromedp.Text("#action-log", &logged, chromedp.ByID),
	); err != nil {
		t.Fatalf("the console's action: %v", err)
	}
	if !strings.Contains(items, "ingest/job/") || !strings.Contains(items, "404") || counted != "2" ||
		!strings.Contains(acted, "moved") || !strings.Contains(logged, "retry") || !strings.Contains(logged, "done") {
		t.Errorf("console: items %q, counted %q, acted %q, log %q", items, counted, acted, logged)
	}
	consoleFile := filepath.Join(filepath.Dir(file), "dashboard-work.png")
	if err := os.WriteFile(consoleFile, console, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("console: counted %s, %s; screenshot %s", counted, acted, consoleFile)

	// Signing out forgets the session: the page asks for a key again.
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#research", chromedp.ByID),
		chromedp.Submit("header form", chromedp.ByQuery),
		chromedp.WaitVisible("#key", chromedp.ByID),
	); err != nil {
		t.Fatalf("signing out: %v", err)
	}
}

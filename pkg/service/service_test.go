package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archivist/archivist/devkit/testenv"
	"github.com/archivist/archivist/pkg/httpauth"
	"github.com/archivist/archivist/pkg/service"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminReadiness(t *testing.T) {
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	base := "http://" + a.Addr()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("healthz %d", code)
	}
	// Listening before any service has begun is not ready.
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "no service") {
		t.Errorf("readyz before any service: %d %q", code, body)
	}
	a.Starting("curator")
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "curator") {
		t.Errorf("readyz while starting: %d %q", code, body)
	}
	a.Started("curator")
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("readyz once started: %d", code)
	}
	broken := errors.New("connection refused")
	a.AddCheck("database", func(context.Context) error { return broken })
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "database: connection refused") {
		t.Errorf("readyz with a failing check: %d %q", code, body)
	}
	broken = nil
	a.AddCheck("database", func(context.Context) error { return nil })
	a.ShuttingDown()
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("readyz while shutting down: %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics: %d", code)
	}
}

// TestServeStopsInReverseOrder starts three services and checks that a
// cancelled context stops them last-started first, each after it was ready.
func TestServeStopsInReverseOrder(t *testing.T) {
	var mu sync.Mutex
	var events []string
	record := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	def := func(name string) service.Definition {
		return service.Definition{Name: name, Run: func(ctx context.Context, env *service.Env) error {
			record("start " + name)
			env.Ready()
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond) // a drain that takes a moment
			record("stop " + name)
			return nil
		}}
	}
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.Serve(ctx, []service.Definition{def("a"), def("b"), def("c")},
			service.Common{ShutdownTimeout: 5 * time.Second, Auth: httpauth.Config{Mode: "off"}}, service.Deps{Log: testenv.Logger(t), Admin: a})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _ := get(t, "http://"+a.Addr()+"/readyz"); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Each service says what runs, for dashboards and absent() alerts.
	_, metrics := get(t, "http://"+a.Addr()+"/metrics")
	for _, name := range []string{"a", "b", "c"} {
		want := fmt.Sprintf(`archivist_build_info{go_version=%q,service=%q,version=%q} 1`, runtime.Version(), name, service.Version)
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	got := strings.Join(events[3:], ",")
	if got != "stop c,stop b,stop a" {
		t.Errorf("stop order %s", got)
	}
}

// TestServeReportsAServiceThatDies checks that a service whose Run fails
// brings the process down with its error instead of leaving it half alive.
func TestServeReportsAServiceThatDies(t *testing.T) {
	boom := errors.New("lost the plot")
	defs := []service.Definition{
		{Name: "steady", Run: func(ctx context.Context, env *service.Env) error { env.Ready(); <-ctx.Done(); return nil }},
		{Name: "fragile", Run: func(ctx context.Context, env *service.Env) error { env.Ready(); return boom }},
	}
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	err = service.Serve(context.Background(), defs, service.Common{ShutdownTimeout: 5 * time.Second, Auth: httpauth.Config{Mode: "off"}}, service.Deps{Log: testenv.Logger(t), Admin: a})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "fragile") {
		t.Errorf("serve returned %v", err)
	}
}

// TestServeFailsWhenAnAPICannotListen: a service whose port is taken brings
// the process down with the reason instead of hanging half started.
func TestServeFailsWhenAnAPICannotListen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	def := service.Definition{Name: "api", Run: func(ctx context.Context, env *service.Env) error {
		return env.ServeHTTP(ctx, busy.Addr().String(), http.NotFoundHandler(), func(string) { env.Ready() })
	}}
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	err = service.Serve(context.Background(), []service.Definition{def}, service.Common{ShutdownTimeout: 5 * time.Second, Auth: httpauth.Config{Mode: "off"}}, service.Deps{Log: testenv.Logger(t), Admin: a})
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Errorf("serve returned %v", err)
	}
}

// TestEnvServeStopsLoopsThenStoppers: a service's loops run while its API
// serves; when the API stops, the loops are cancelled and waited for before
// the stoppers run; a loop's error is returned; a port that is taken stops
// the loops at once.
func TestEnvServeStopsLoopsThenStoppers(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	ticks := make(chan struct{}, 100)
	loopErr := errors.New("loop ended badly")
	def := service.Definition{Name: "svc", Run: func(ctx context.Context, env *service.Env) error {
		loops := []service.Loop{
			func(ctx context.Context) error { <-ctx.Done(); note("loop done"); return loopErr },
			service.Every(5*time.Millisecond, func(context.Context) { ticks <- struct{}{} }),
		}
		return env.Serve(ctx, "test API", "127.0.0.1:0", http.NotFoundHandler(), loops,
			func(context.Context) error { note("stopper"); return nil })
	}}
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.Serve(ctx, []service.Definition{def}, service.Common{ShutdownTimeout: 5 * time.Second, Auth: httpauth.Config{Mode: "off"}}, service.Deps{Log: testenv.Logger(t), Admin: a})
	}()
	<-ticks
	<-ticks
	cancel()
	if err := <-done; !errors.Is(err, loopErr) {
		t.Errorf("serve returned %v, want the loop's error", err)
	}
	if strings.Join(order, ",") != "loop done,stopper" {
		t.Errorf("order %v: loops must end before the stoppers run", order)
	}

	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	def.Run = func(ctx context.Context, env *service.Env) error {
		return env.Serve(ctx, "test API", busy.Addr().String(), http.NotFoundHandler(),
			[]service.Loop{func(ctx context.Context) error { <-ctx.Done(); return nil }})
	}
	err = service.Serve(context.Background(), []service.Definition{def}, service.Common{ShutdownTimeout: 5 * time.Second, Auth: httpauth.Config{Mode: "off"}}, service.Deps{Log: testenv.Logger(t), Admin: a})
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Errorf("a taken port: %v", err)
	}
}

// TestHealthcheck: `<service> healthcheck`, a container's health check, is
// ready exactly when /readyz is, and says why not.
func TestHealthcheck(t *testing.T) {
	a, err := service.NewAdmin("127.0.0.1:0", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	_, port, _ := net.SplitHostPort(a.Addr())
	addr := ":" + port // as ADMIN_ADDR is in a container
	a.Starting("svc")
	a.Waiting("svc", "schema x is behind")
	if err := service.Healthcheck(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "schema x is behind") {
		t.Errorf("starting: %v, want not ready, saying why", err)
	}
	a.Started("svc")
	if err := service.Healthcheck(context.Background(), addr); err != nil {
		t.Errorf("started: %v", err)
	}
	if err := service.Healthcheck(context.Background(), "bad"); err == nil || !strings.Contains(err.Error(), "ADMIN_ADDR") {
		t.Errorf("a bad address: %v", err)
	}
}

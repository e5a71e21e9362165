package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil"
)

// startServer runs a start command's xRun until the test ends, and returns
// the URL it printed.
func startServer(t *testing.T, f *Factory, run func(context.Context, *startOptions) error) (url string, stop func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	f.IO.Out = pw
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := run(ctx, &startOptions{f: f})
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no URL line: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	var stopped bool
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { stop() })
	return strings.TrimSpace(line), stop
}

// serverEnv keeps serverProcs from changing GOMAXPROCS for the test binary.
func serverEnv(kv ...string) map[string]string {
	env := map[string]string{"GOMAXPROCS": "0"}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBridgeStartRun(t *testing.T) {
	cfg := config.Default()
	cfg.Bridge.Listen = "127.0.0.1:0"
	f, _, _ := fakeFactory(t, &cfg, serverEnv())
	url, stop := startServer(t, f, bridgeStartRun)
	home, _ := f.Home()
	if rec, err := readBridgeRecord(home); err != nil || rec.URL != url || rec.PID != os.Getpid() {
		t.Errorf("bridge.json = %+v, %v; want this process serving %s", rec, err, url)
	}

	// rotor status finds it through bridge.json, with bridge.token.
	var out bytes.Buffer
	st := &statusOptions{IO: &IOStreams{Out: &out, ErrOut: io.Discard}, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: f.HTTPClient, Format: FormatJSON}
	if err := statusRun(context.Background(), st); err != nil || !strings.Contains(out.String(), `"pools"`) {
		t.Errorf("status of the started bridge: %v\n%s", err, out.String())
	}
	if code := get(t, url+"/v1/status", "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("status with a wrong token: %d, want 401", code)
	}

	if err := stop(); err != nil {
		t.Errorf("bridge stopped with %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(home, bridgeFileName)); err == nil {
		t.Error("bridge.json left behind after a clean stop")
	}
}

// A stopping bridge removes bridge.json only while the record is its own:
// a bridge started later in the same home keeps its record, so that rotor
// status still finds it.
func TestBridgeStopKeepsALaterBridgesRecord(t *testing.T) {
	home := t.TempDir()
	removeFirst, err := writeBridgeRecord(home, "http://127.0.0.1:1111")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeBridgeRecord(home, "http://127.0.0.1:2222"); err != nil {
		t.Fatal(err)
	}
	removeFirst()
	if rec, err := readBridgeRecord(home); err != nil || rec.URL != "http://127.0.0.1:2222" {
		t.Errorf("bridge.json after the first bridge stopped = %+v, %v; want the later bridge's", rec, err)
	}
}

// A second bridge on one home takes bridge.json; when it stops, the
// record of a first bridge still running is put back (rotor status finds
// it again), and one of a bridge no longer running is not.
func TestBridgeStopPutsBackARunningBridgesRecord(t *testing.T) {
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Skipf("cannot start a process to stand for the first bridge: %v", err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pid  int
		kept bool
	}{{"first still running", live.Process.Pid, true}, {"first gone", dead.Process.Pid, false}} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			first := fmt.Sprintf(`{"pid":%d,"url":"http://127.0.0.1:1111"}`+"\n", tc.pid)
			if err := os.WriteFile(filepath.Join(home, bridgeFileName), []byte(first), 0o600); err != nil {
				t.Fatal(err)
			}
			remove, err := writeBridgeRecord(home, "http://127.0.0.1:2222")
			if err != nil {
				t.Fatal(err)
			}
			remove()
			rec, err := readBridgeRecord(home)
			if tc.kept && (err != nil || rec.URL != "http://127.0.0.1:1111" || rec.PID != tc.pid) {
				t.Errorf("bridge.json after the second bridge stopped = %+v, %v; want the first bridge's back", rec, err)
			}
			if !tc.kept && err == nil {
				t.Errorf("bridge.json after the second bridge stopped = %+v; want none (the first bridge is gone)", rec)
			}
		})
	}
}

func TestRuntimeStartRun(t *testing.T) {
	const token = "runtime-test-token-0123456789abcdef0123456789"
	cfg := config.Default()
	cfg.Runtime.Listen = "127.0.0.1:0"
	f, _, _ := fakeFactory(t, &cfg, serverEnv("ROTOR_RUNTIME_TOKEN", token))
	url, stop := startServer(t, f, runtimeStartRun)
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", http.StatusOK},
		{"/v1/status", token, http.StatusOK},
		{"/v1/status", "", http.StatusUnauthorized},
	} {
		if code := get(t, url+tc.path, tc.token); code != tc.want {
			t.Errorf("GET %s (token %v): %d, want %d", tc.path, tc.token != "", code, tc.want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("runtime stopped with %v, want nil", err)
	}

	// A refused address creates nothing: not even the home folder.
	cfg.Runtime.Listen = "[::]:0"
	f, _, _ = fakeFactory(t, &cfg, serverEnv())
	wantUsageError(t, "runtime start on [::]", runtimeStartRun(context.Background(), &startOptions{f: f}), "--allow-non-loopback")
	if home, _ := f.Home(); dirExists(home) {
		t.Error("a refused runtime start created the home folder")
	}
}

func dirExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestDemoRun(t *testing.T) {
	f, out, errOut := fakeFactory(t, nil, nil)
	kept := filepath.Join(t.TempDir(), "demo")
	opts := &demoOptions{IO: f.IO, Clock: f.Clock, Version: "test", HomeIgnored: true, Requests: 3, Keep: kept}
	if err := demoRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rotor demo", "ledger report --by operation,credential,status", "team-a", "The demo's files stay in " + kept} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The report reads the ledger over the demo's clock, which wrote it.
	if _, report, _ := strings.Cut(out.String(), "ledger report --by"); !strings.Contains(report, "team-a") {
		t.Errorf("the demo's ledger report lists no credential:\n%s", report)
	}
	if !strings.Contains(errOut.String(), "--home, --db and --config are ignored") {
		t.Errorf("stderr %q: want the note that --home is ignored", errOut)
	}
	if home, _ := f.Home(); dirExists(home) {
		t.Error("the demo created the factory's home folder")
	}
	if !dirExists(filepath.Join(kept, "rotor.db")) {
		t.Error("demo --keep left no ledger")
	}
	wantUsageError(t, "demo --keep EXISTING", demoRun(context.Background(), opts), "it exists")
}

// Ctrl-C on the demo: it exits 130 saying it was interrupted, with its
// temporary folder removed. It exited 1 with "rotor: open ledger ...:
// context canceled" (or whatever step the signal cut).
func TestDemoInterruptedExits130AndCleansUp(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	f, _, errOut := testFactory(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the demo's first step
	if code := run(ctx, f, []string{"demo"}); code != 130 || !strings.Contains(errOut.String(), "demo interrupted") || strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("interrupted demo: exit %d, stderr %q; want 130 and \"demo interrupted\"", code, errOut)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// bridge start warns of a bridge.token the ledger no longer holds (revoked:
// every request with it is refused), and only then.
func TestBridgeStartWarnsOnlyOfAnUnregisteredToken(t *testing.T) {
	ctx := context.Background()
	f, _, logs := testFactory(t)
	if err := os.Chmod(f.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := ensureBridgeToken(ctx, f); err != nil {
		t.Fatal(err)
	}
	const warning = "bridge.token is not registered in the ledger"
	logs.Reset()
	if err := ensureBridgeToken(ctx, f); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), warning) {
		t.Errorf("start with the registered bridge.token warned: %s", logs)
	}
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RevokeClientToken(ctx, DefaultTokenLabel); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := ensureBridgeToken(ctx, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), warning) {
		t.Errorf("start with a revoked bridge.token: logs %q, want the warning", logs)
	}
}

// The server's write timeout outlasts runtime.deadline: a request cut at
// its deadline still gets its 504 written, not a closed connection.
func TestServerWriteTimeoutOutlastsTheDeadline(t *testing.T) {
	cfg := config.Default()
	f, _, _ := fakeFactory(t, &cfg, nil)
	for _, d := range []time.Duration{time.Second, config.DefaultDeadline, 10 * time.Minute} {
		cfg.Runtime.Deadline = d
		if got := serveOptions(&cfg, f).WriteTimeout; got < d+10*time.Second {
			t.Errorf("runtime.deadline %v: write timeout %v, want at least 10s more", d, got)
		}
	}
}

// A bridge in front of a standalone runtime builds no route of its own:
// the credentials and their keys are the runtime's, so the bridge neither
// loads them nor warns of one whose key it lacks.
func TestBridgeBeforeAStandaloneRuntimeLoadsNoCredentials(t *testing.T) {
	cfg := config.Default()
	cfg.Bridge.Listen = "127.0.0.1:0"
	cfg.Bridge.RuntimeURL = "http://127.0.0.1:1"
	cfg.Pools["api"] = config.Pool{Credentials: []config.Credential{{Name: "team-a", Enabled: true, BaseURL: "http://127.0.0.1:1", APIKeyEnv: "TEAM_A_KEY"}}}
	var logs testutil.SyncBuffer
	f := newFixedFactory(&IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, filepath.Join(t.TempDir(), "home"), &cfg,
		serverEnv("ROTOR_RUNTIME_TOKEN", "runtime-test-token-0123456789abcdef0123456789"), clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(f.Close)
	_, stop := startServer(t, f, bridgeStartRun)
	if err := stop(); err != nil {
		t.Errorf("bridge stopped with %v, want nil", err)
	}
	if l := logs.String(); !strings.Contains(l, "bridge started") || strings.Contains(l, "team-a") {
		t.Errorf("bridge before a standalone runtime logged:\n%s\nwant it started, and nothing of the runtime's credential team-a", l)
	}
}

package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/config"
)

// rotor fake-provider prints its URL, the keys to export and a pools:
// section that rotor's own config parser takes; the keys it printed are
// the ones it serves (any other gets 401); it serves until its context
// ends (SIGINT/SIGTERM in Main) and then returns nil (exit 0).
func TestFakeProviderServesWhatItPrints(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := &fakeProviderOptions{IO: &IOStreams{Out: pw, ErrOut: io.Discard}, Logger: func() *slog.Logger { return slog.New(slog.DiscardHandler) },
		Listen: "127.0.0.1:0", Keys: 3}
	done := make(chan error, 1)
	go func() { done <- fakeProviderRun(ctx, opts) }()

	var lines []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "model_profiles") && strings.Count(strings.Join(lines, "\n"), "model_profiles") == 3 {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "http://127.0.0.1:") {
		t.Fatalf("first line is not the base URL: %q", lines)
	}
	base := lines[0]
	env := map[string]string{}
	var snippet []string
	for i, l := range lines {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		if l == "pools:" {
			snippet = lines[i:]
		}
	}
	if len(env) != 3 || env["ROTOR_FAKE_KEY_3"] == "" {
		t.Fatalf("export lines: %v", env)
	}
	cfg, err := config.ParseFile([]byte(strings.Join(snippet, "\n") + "\n"))
	if err != nil {
		t.Fatalf("the pools: section does not parse as rotor.yaml: %v\n%s", err, strings.Join(snippet, "\n"))
	}
	creds := cfg.Pools[config.PoolAPI].Credentials
	if len(creds) != 3 {
		t.Fatalf("pools.api has %d credentials, want 3", len(creds))
	}
	for _, c := range creds {
		if c.BaseURL != base || env[c.APIKeyEnv] == "" {
			t.Errorf("credential %s: base_url %s, api_key_env %s (exported: %v)", c.Name, c.BaseURL, c.APIKeyEnv, env[c.APIKeyEnv] != "")
		}
	}
	decide := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/decisions", strings.NewReader(`{"model":"decide-mini","input":"x","question":{"type":"predicate"}}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range creds {
		if got := decide(env[c.APIKeyEnv]); got != 200 {
			t.Errorf("%s's key: status %d, want 200", c.Name, got)
		}
	}
	if got := decide("not-a-fake-key"); got != 401 {
		t.Errorf("an unknown key: status %d, want 401", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("fake-provider returned %v on stop, want nil (exit 0)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fake-provider did not stop")
	}
	if _, err := http.Get(base + "/v1/models"); err == nil {
		t.Error("the fake provider still serves after stop")
	}
}

// Bad flags exit 2 naming the flag; a non-loopback address is refused.
func TestFakeProviderBadFlagsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keys", "0"}, "--keys"},
		{[]string{"--keys", "101"}, "--keys"},
		{[]string{"--listen", ""}, "--listen"},
		{[]string{"--listen", "0.0.0.0:0"}, "0.0.0.0:0"},
		{[]string{"--listen", "nonsense"}, "nonsense"},
	} {
		f, _, _ := fakeFactory(t, nil, nil)
		cmd := newCmdFakeProvider(f, nil)
		cmd.SetArgs(c.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v (exit %d), want exit 2 naming %s", c.args, err, exitCode(err), c.want)
		}
	}
}

// Registered here rather than in verbs_test.go's literal, beside the
// command's other tests.
func init() {
	runFTests["fake-provider"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdFakeProvider, "--listen", "127.0.0.1:0", "--keys", "5")
		if got.Listen != "127.0.0.1:0" || got.Keys != 5 {
			t.Errorf("options %+v, want listen 127.0.0.1:0 and 5 keys", got)
		}
		if d := flagsToOptions(t, f, newCmdFakeProvider); d.Listen != "127.0.0.1:8789" || d.Keys != 2 {
			t.Errorf("defaults %+v, want 127.0.0.1:8789 and 2 keys", d)
		}
		refused(t, f, newCmdFakeProvider, "--keys", "--keys", "0")
		refused(t, f, newCmdFakeProvider, "--listen", "--listen", "nonsense")
	}
}

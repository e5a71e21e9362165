package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/tokenfile"
)

// The xRun tests run each verb with a fake Factory (newFixedFactory over
// t.TempDir) and buffers, without building the binary.

func TestVersionRun(t *testing.T) {
	f, out, _ := fakeFactory(t, nil, nil)
	if err := versionRun(&versionOptions{IO: f.IO, Info: buildInfo{Version: "v1.2.3", Revision: "abc"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "rotor v1.2.3 (revision abc)\n"; got != want {
		t.Errorf("version printed %q, want %q", got, want)
	}
}

func TestInitRun(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	home, _ := f.Home()
	opts := &initOptions{IO: f.IO, EnsureHome: f.EnsureHome, ConfigPath: f.ConfigPath, Ledger: f.LedgerOrCreate}
	if err := initRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	cfgPath, tokPath := filepath.Join(home, "rotor.yaml"), filepath.Join(home, "bridge.token")
	if want := "wrote " + cfgPath + "\nwrote " + tokPath + " (the default client token, mode 0600)\n"; out.String() != want {
		t.Errorf("init printed %q, want %q", out, want)
	}
	if b, err := os.ReadFile(cfgPath); err != nil || !bytes.Equal(b, config.Starter) {
		t.Errorf("rotor.yaml is not the starter file: %v", err)
	}
	// rotor.yaml may come to hold a ledger URL with its password: only
	// its owner reads it.
	if fi, err := os.Stat(cfgPath); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("rotor.yaml has mode %04o, want 0600", fi.Mode().Perm())
	}
	tok, err := tokenfile.Read(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	store, _ := f.Ledger(ctx)
	if label, ok, err := store.LookupToken(ctx, tok.Hash()); err != nil || !ok || label != DefaultTokenLabel {
		t.Errorf("bridge.token in the ledger: %q %v %v, want label default", label, ok, err)
	}

	// A second init refuses, naming the file, and changes nothing.
	err = initRun(ctx, opts)
	wantUsageError(t, "init again", err, cfgPath)
	if again, _ := tokenfile.Read(tokPath); !again.Equal(tok) {
		t.Error("a refused init replaced bridge.token")
	}
	opts.Force = true
	if err := initRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.LookupToken(ctx, tok.Hash()); ok {
		t.Error("init --force kept the old token working")
	}
}

func TestConfigCheckRun(t *testing.T) {
	cred := func(name, env string) config.Credential {
		return config.Credential{Name: name, Enabled: true, Region: "eu", BaseURL: "http://127.0.0.1:1", APIKeyEnv: env}
	}
	cfg := config.Default()
	cfg.Pools["api"] = config.Pool{Credentials: []config.Credential{cred("team-a", "KEY_A"), cred("team-b", "KEY_B")}}
	tests := []struct {
		name      string
		env       map[string]string
		malformed []string
		wantErr   string // a usage error mentioning it; "" for none
		stderr    string
	}{
		{"keys set", map[string]string{"KEY_A": "a", "KEY_B": "b"}, nil, "", "config ok: no "},
		{"key missing", map[string]string{"KEY_A": "a"}, nil, "pools.api credential team-b: env KEY_B is not set", ""},
		{"malformed setting", map[string]string{"KEY_A": "a", "KEY_B": "b"}, []string{"ROTOR_MODEL_COOLDOWN_MAX_SECONDS"}, "", "loads with 1 malformed setting(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, errOut := fakeFactory(t, &cfg, tt.env)
			opts := &configCheckOptions{IO: f.IO, Config: f.Config, Home: f.Home, ConfigPath: f.ConfigPath, LookupEnv: f.LookupEnv,
				Malformed: func() []string { return tt.malformed }, Format: FormatCSV}
			err := configCheckRun(opts)
			if tt.wantErr != "" {
				wantUsageError(t, "config check", err, tt.wantErr)
			} else if err != nil {
				t.Fatal(err)
			}
			want := "pool,credential,enabled,region,base_url,key_source,key\n"
			for _, c := range []string{"team-a", "team-b"} {
				state := "set"
				if _, ok := tt.env["KEY_"+strings.ToUpper(c[5:])]; !ok {
					state = "not set"
				}
				want += "api," + c + ",true,eu,http://127.0.0.1:1,env KEY_" + strings.ToUpper(c[5:]) + "," + state + "\n"
			}
			if out.String() != want {
				t.Errorf("stdout %q, want %q", out, want)
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr %q, want %q", errOut, tt.stderr)
			}
		})
	}
}

// config check names the ledger it would open with a URL's password
// masked: its output is what users paste into an issue.
func TestConfigCheckMasksTheLedgerPassword(t *testing.T) {
	cfg := config.Default()
	f, _, errOut := fakeFactory(t, &cfg, nil)
	opts := &configCheckOptions{IO: f.IO, Config: f.Config, Home: f.Home, ConfigPath: f.ConfigPath, LookupEnv: f.LookupEnv,
		Malformed: func() []string { return nil }, Format: FormatCSV,
		DBPath: func() (string, error) { return "postgres://rotor:s3cret-pw@db.example:5432/rotor", nil }}
	if err := configCheckRun(opts); err != nil {
		t.Fatal(err)
	}
	if got := errOut.String(); strings.Contains(got, "s3cret-pw") || !strings.Contains(got, "ledger: postgres://rotor:xxxxx@db.example:5432/rotor\n") {
		t.Errorf("stderr %q, want the ledger URL with its password masked", got)
	}
}

func TestBudgetRemoveRun(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := budgets.Budget{Name: "daily", Kind: budgets.KindRequests, Limit: 3, Window: budgets.Window{Calendar: "day"}, CreatedAt: f.Clock.Now()}
	if err := store.PutBudget(ctx, b.Record(), false); err != nil {
		t.Fatal(err)
	}
	opts := flagsToOptions(t, f, newCmdBudgetRemove, "daily")
	if err := removeRun(ctx, opts); err != nil || out.String() != "removed budget daily\n" {
		t.Errorf("remove: %v, printed %q", err, out)
	}
	if bs, _ := store.Budgets(ctx); len(bs) != 0 {
		t.Errorf("budgets after remove: %v", bs)
	}
	wantUsageError(t, "remove again", removeRun(ctx, opts), `no budget named "daily"`)
}

func TestReportRun(t *testing.T) {
	ctx := context.Background()
	f, out, errOut := fakeFactory(t, nil, nil)
	if _, err := f.LedgerOrCreate(ctx); err != nil {
		t.Fatal(err)
	}
	now := f.Clock.Now()
	opts := &reportOptions{IO: f.IO, Clock: f.Clock, Ledger: f.Ledger, Format: FormatCSV}
	opts.Query.From, opts.Query.To, opts.Query.By = now.Add(-24*time.Hour), now, []string{"model", "day"}
	if err := reportRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if want := "model,day,requests,input_tokens,output_tokens,total_tokens,cost_usd,errors,cached_input_tokens,reasoning_tokens,known_cost_usd,unknown_cost_rows,unknown_token_rows\n"; out.String() != want || errOut.Len() != 0 {
		t.Errorf("empty report: stdout %q stderr %q, want only %q", out, errOut, want)
	}
}

func TestTokenCreateListRevokeRun(t *testing.T) {
	ctx := context.Background()
	f, out, errOut := fakeFactory(t, nil, nil)
	create := &tokenCreateOptions{IO: f.IO, Ledger: f.LedgerOrCreate, Label: "ci"}
	if err := tokenCreateRun(ctx, create); err != nil {
		t.Fatal(err)
	}
	printed := strings.TrimSpace(out.String())
	if !strings.Contains(errOut.String(), `created token "ci"`) || strings.Contains(errOut.String(), printed) {
		t.Errorf("stderr %q: want the label and never the token", errOut)
	}
	store, _ := f.Ledger(ctx)
	tok := secret.New(printed)
	if label, ok, err := store.LookupToken(ctx, tok.Hash()); err != nil || !ok || label != "ci" {
		t.Errorf("printed token in the ledger: %q %v %v, want ci", label, ok, err)
	}
	wantUsageError(t, "create ci again", tokenCreateRun(ctx, create), `a token labelled "ci" exists`)

	out.Reset()
	if err := tokenListRun(ctx, &listOptions{IO: f.IO, Ledger: f.Ledger, Format: FormatCSV}); err != nil {
		t.Fatal(err)
	}
	if want := "label,created,last_used\nci,2026-11-30T12:00:00Z,never\n"; out.String() != want {
		t.Errorf("list csv %q, want %q", out, want)
	}

	out.Reset()
	revoke := flagsToOptions(t, f, newCmdTokenRevoke, "ci")
	if err := removeRun(ctx, revoke); err != nil || out.String() != "revoked token ci\n" {
		t.Errorf("revoke: %v, printed %q", err, out)
	}
	if _, ok, _ := store.LookupToken(ctx, tok.Hash()); ok {
		t.Error("a revoked token still works")
	}
	wantUsageError(t, "revoke again", removeRun(ctx, revoke), `no token labelled "ci"`)
}

func TestStatusRun(t *testing.T) {
	const token = "status-test-token-0123456789abcdef0123456789"
	const doc = `{"version":"t","time":"2026-11-30T12:00:00Z","pools":[{"pool":"api","model_cooldown_enabled":true,` +
		`"credentials":[{"name":"team-a","resting_until":"2026-11-30T12:05:00Z","scoped_observations":2},{"name":"team-b","scoped_observations":0}],` +
		`"catalogs":[{"credential":"team-a","region":"eu","fetched":"2026-11-30T11:59:00Z","fresh":true},{"credential":"team-b","region":"us","fresh":false}]}],` +
		`"budgets":[{"name":"daily","kind":"requests","window":"day","limit":10,"used":3,"remaining":7,"unknown_rows":0,"state":"ok"},` +
		`{"name":"spend","kind":"cost","window":"day","limit":5000000,"used":1250000,"remaining":3750000,"unknown_rows":0,"state":"ok"}]}`
	// The factory's HTTPClient is the seam: a fake bridge answers in
	// process, at a URL no real client could reach.
	bridge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "bridge.invalid" || r.URL.Path != "/v1/status" || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return
		}
		w.Write([]byte(doc))
	})
	const bridgeURL = "http://bridge.invalid"
	fakeClient := func() *http.Client {
		return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			rec := httptest.NewRecorder()
			bridge.ServeHTTP(rec, r)
			return rec.Result(), nil
		})}
	}

	tests := []struct {
		name, format, url string
		env               map[string]string
		want              string
	}{
		{"json is the bridge's document", FormatJSON, bridgeURL, map[string]string{"ROTOR_TOKEN": token}, doc},
		{"csv is the credentials table", FormatCSV, bridgeURL, map[string]string{"ROTOR_TOKEN": token},
			"pool,credential,region,catalog,resting_until,auth_cooling_until,model_cooldowns,next_release\n" +
				"api,team-a,eu,fresh,2026-11-30T12:05:00Z,,2,\napi,team-b,us,never fetched,,,0,\n"},
		{"url from bridge.json", FormatJSON, "", map[string]string{"ROTOR_TOKEN": token}, doc},
		{"--jq filters the bridge's document", jqMark + `.budgets[] | "\(.name) \(.used)/\(.limit)"`, bridgeURL, map[string]string{"ROTOR_TOKEN": token}, "daily 3/10\nspend 1250000/5000000\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, _ := fakeFactory(t, nil, tt.env)
			if tt.url == "" {
				home, _ := f.EnsureHome()
				if _, err := writeBridgeRecord(home, bridgeURL); err != nil {
					t.Fatal(err)
				}
			}
			opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: fakeClient, URL: tt.url, Format: tt.format}
			if err := statusRun(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("stdout %q, want %q", out, tt.want)
			}
		})
	}

	// The table prints a cost budget in USD, as budget list's does, not
	// the document's micro-USD.
	t.Run("table", func(t *testing.T) {
		f, out, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": token})
		opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: fakeClient, URL: bridgeURL, Format: FormatTable}
		if err := statusRun(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "spend") && (!strings.Contains(line, " $1.25 ") || !strings.Contains(line, " $5 ") || strings.Contains(line, "000")) {
				t.Errorf("cost budget row %q, want $1.25 used of $5, as budget list prints them", line)
			}
			if strings.Contains(line, "daily") && (!strings.Contains(line, " 3 ") || !strings.Contains(line, " 10 ")) {
				t.Errorf("requests budget row %q, want 3 used of 10", line)
			}
		}
		if !strings.Contains(out.String(), "spend") {
			t.Errorf("no cost budget row in:\n%s", out)
		}
	})
	// A record left by a bridge that did not stop cleanly names a pid no
	// longer running: whatever listens on its old port now is not the
	// bridge and must not get the token (a local user may listen there).
	t.Run("stale bridge.json", func(t *testing.T) {
		f, _, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": token})
		home, _ := f.EnsureHome()
		dead := exec.Command("true")
		if err := dead.Run(); err != nil {
			t.Fatal(err)
		}
		rec := fmt.Sprintf(`{"pid":%d,"url":%q}`+"\n", dead.Process.Pid, bridgeURL)
		if err := os.WriteFile(filepath.Join(home, bridgeFileName), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		spy, asked := spyClient()
		opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: spy, Format: FormatJSON}
		err := statusRun(context.Background(), opts)
		if asked.Load() {
			t.Errorf("rotor status sent the token to the URL of a record whose pid %d is not running", dead.Process.Pid)
		}
		if err == nil || !strings.Contains(err.Error(), "not running") {
			t.Errorf("status with a stale bridge.json: %v, want an error saying its pid is not running", err)
		}
	})
	t.Run("no token", func(t *testing.T) {
		f, _, _ := fakeFactory(t, nil, nil)
		opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: fakeClient, URL: bridgeURL, Format: FormatJSON}
		wantUsageError(t, "status without a token", statusRun(context.Background(), opts), "set ROTOR_TOKEN")
	})
	t.Run("refused", func(t *testing.T) {
		f, _, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": "wrong-token-0123456789abcdef0123456789"})
		opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: fakeClient, URL: bridgeURL, Format: FormatJSON}
		err := statusRun(context.Background(), opts)
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "refused the token from ROTOR_TOKEN") {
			t.Errorf("wrong token: %v (exit %d), want exit 2 saying the bridge refused the token from ROTOR_TOKEN", err, exitCode(err))
		}
	})
	// A ROTOR_TOKEN no header can carry is refused before any request,
	// naming the variable, never echoing it.
	for name, tok := range map[string]string{"blank": "  ", "control character": "secret-part\nmore"} {
		t.Run("ROTOR_TOKEN "+name, func(t *testing.T) {
			f, _, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": tok})
			spy, asked := spyClient()
			opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: spy, URL: bridgeURL, Format: FormatJSON}
			err := statusRun(context.Background(), opts)
			if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "ROTOR_TOKEN") || strings.Contains(err.Error(), "secret-part") {
				t.Errorf("ROTOR_TOKEN %q: %v (exit %d), want exit 2 naming ROTOR_TOKEN without its value", tok, err, exitCode(err))
			}
			if asked.Load() {
				t.Error("a request was sent")
			}
		})
	}
}

// spyClient is an HTTP client that sends nothing: it records that it was
// asked and fails as a bridge that does not answer.
func spyClient() (func() *http.Client, *atomic.Bool) {
	asked := new(atomic.Bool)
	return func() *http.Client {
		return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			asked.Store(true)
			return nil, errors.New("no bridge")
		})}
	}, asked
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// homeWithConfig makes ROTOR_HOME a fresh home (0700) holding rotor.yaml
// with yaml, and returns it.
func homeWithConfig(t *testing.T, yaml string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv("ROTOR_HOME", home)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "rotor.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// config check validates "exactly as rotor bridge start would": a bridge
// in front of a standalone runtime (bridge.runtime_url) with no runtime
// token exits 2 at start, so config check does too, naming the token,
// where it said "config ok"; with the token it is ok.
func TestConfigCheckAgreesWithBridgeStartOnTheRuntimeToken(t *testing.T) {
	t.Setenv("ROTOR_RUNTIME_TOKEN", "")
	homeWithConfig(t, "bridge:\n  runtime_url: http://127.0.0.1:1\n")
	start, _, startErr := testFactory(t)
	if code := run(context.Background(), start, []string{"bridge", "start", "--listen", "127.0.0.1:0"}); code != ExitUsage {
		t.Fatalf("bridge start: exit %d, stderr %q; want 2", code, startErr)
	}
	check, _, checkErr := testFactory(t)
	if code := run(context.Background(), check, []string{"config", "check"}); code != ExitUsage ||
		!strings.Contains(checkErr.String(), "runtime.token") || strings.Contains(checkErr.String(), "config ok") {
		t.Errorf("config check: exit %d, stderr %q; bridge start exits 2 (%q): want the same, naming the runtime token",
			code, checkErr, strings.TrimSpace(startErr.String()))
	}
	// One character short of the 32 bridge start wants is refused alike,
	// naming the variable, never its value.
	short := strings.Repeat("s", 31)
	t.Setenv("ROTOR_RUNTIME_TOKEN", short)
	shortCheck, _, shortErr := testFactory(t)
	if code := run(context.Background(), shortCheck, []string{"config", "check"}); code != ExitUsage ||
		!strings.Contains(shortErr.String(), "ROTOR_RUNTIME_TOKEN is shorter than 32") || strings.Contains(shortErr.String(), short) {
		t.Errorf("config check with a 31-character ROTOR_RUNTIME_TOKEN: exit %d, stderr %q; want 2 naming the variable, not its value", code, shortErr)
	}
	t.Setenv("ROTOR_RUNTIME_TOKEN", strings.Repeat("r", 32))
	ok, _, okErr := testFactory(t)
	if code := run(context.Background(), ok, []string{"config", "check"}); code != 0 || !strings.Contains(okErr.String(), "config ok") {
		t.Errorf("config check with the runtime token: exit %d, stderr %q; want config ok", code, okErr)
	}
	// The credentials are the standalone runtime's: a bridge in front of
	// it with no pools of its own serves, so no "no enabled credential".
	if strings.Contains(okErr.String(), "no enabled credential") {
		t.Errorf("config check of a bridge in front of a runtime warned of its empty pools: %q", okErr)
	}
}

// config check agrees with bridge start on the home folder too: one that
// others can enter exits 2, naming the chmod; a bridge.listen off loopback
// is named (bridge start refuses it without --allow-non-loopback, a flag
// config check does not take).
func TestConfigCheckAgreesWithBridgeStartOnTheHome(t *testing.T) {
	home := homeWithConfig(t, "bridge:\n  listen: 0.0.0.0:8787\n")
	check, _, checkErr := testFactory(t)
	if code := run(context.Background(), check, []string{"config", "check"}); code != 0 ||
		!strings.Contains(checkErr.String(), "bridge.listen 0.0.0.0:8787 is not a loopback address") {
		t.Errorf("config check: exit %d, stderr %q; want 0 naming the non-loopback bridge.listen", code, checkErr)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	start, _, startErr := testFactory(t)
	if code := run(context.Background(), start, []string{"bridge", "start", "--listen", "127.0.0.1:0"}); code != ExitUsage {
		t.Fatalf("bridge start: exit %d, stderr %q; want 2", code, startErr)
	}
	again, _, againErr := testFactory(t)
	if code := run(context.Background(), again, []string{"config", "check"}); code != ExitUsage ||
		!strings.Contains(againErr.String(), "chmod 700") || strings.Contains(againErr.String(), "config ok") {
		t.Errorf("config check: exit %d, stderr %q; bridge start exits 2 (%q): want the same", code, againErr, strings.TrimSpace(startErr.String()))
	}
}

// A disabled credential may lack its key: config check passes it (exit 0),
// reporting the key as not set, where an enabled one exits 2.
func TestConfigCheckPassesADisabledCredentialWithoutItsKey(t *testing.T) {
	cfg := config.Default()
	cfg.Pools["api"] = config.Pool{Credentials: []config.Credential{
		{Name: "team-a", Enabled: true, BaseURL: "http://127.0.0.1:1", APIKeyEnv: "KEY_A"},
		{Name: "spare", Enabled: false, BaseURL: "http://127.0.0.1:1", APIKeyEnv: "KEY_SPARE"},
	}}
	f, out, errOut := fakeFactory(t, &cfg, map[string]string{"KEY_A": "a"})
	opts := &configCheckOptions{IO: f.IO, Config: f.Config, Home: f.Home, ConfigPath: f.ConfigPath, LookupEnv: f.LookupEnv,
		Malformed: func() []string { return nil }, Format: FormatCSV}
	if err := configCheckRun(opts); err != nil {
		t.Fatalf("config check with a disabled credential lacking its key: %v, want ok", err)
	}
	if !strings.Contains(out.String(), "api,spare,false,,http://127.0.0.1:1,env KEY_SPARE,not set\n") || !strings.Contains(errOut.String(), "config ok") {
		t.Errorf("stdout %q, stderr %q; want spare's key not set, and config ok", out, errOut)
	}
}

// init --force carries the old rotor.yaml's ledger.url into the new one as
// it was, also one holding a quote (a folder named "rotor's"): the new
// file must load, on the same ledger.
func TestInitForceCarriesALedgerURLWithAQuote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.yaml")
	const u = "/srv/rotor's ledgers/team.db"
	if err := os.WriteFile(path, []byte("ledger:\n  url: \""+u+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := starterFor(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := config.LedgerURLOf(b); got != u {
		t.Errorf("the new rotor.yaml's ledger.url is %q, want %q", got, u)
	}
}

// A bridge.token the ledger does not hold, beside no rotor.yaml, is
// refused without --force (exit 2 naming it), and init writes nothing:
// no rotor.yaml that the next init would refuse in turn.
func TestInitRefusesAnUnknownBridgeTokenBeforeWriting(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	home, err := f.EnsureHome()
	if err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(home, "bridge.token")
	if err := tokenfile.Write(tokPath, tokenfile.Generate(), false); err != nil {
		t.Fatal(err)
	}
	err = initRun(ctx, &initOptions{IO: f.IO, EnsureHome: f.EnsureHome, ConfigPath: f.ConfigPath, Ledger: f.LedgerOrCreate})
	wantUsageError(t, "init beside an unknown bridge.token", err, tokPath+" already exists")
	if _, err := os.Stat(filepath.Join(home, "rotor.yaml")); err == nil || out.Len() != 0 {
		t.Errorf("a refused init wrote rotor.yaml (printed %q)", out)
	}
}

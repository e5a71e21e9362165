package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// rotor status and rotor bridge reload find the bridge and the token before
// they send anything: a --url that is not the bridge's, a bridge.json that
// is not a record, or a token file others can read exits 2 naming what to
// fix, and no request leaves with the token. Each runs both commands.
func TestBridgeTargetRefusedBeforeAnyRequest(t *testing.T) {
	const token = "target-test-token-0123456789abcdef0123456789"
	tests := []struct {
		name   string
		url    string // --url, "" for none
		record string // bridge.json, %d the pid of a running process; "" for none
		// tokenFile writes bridge.token with this mode instead of
		// setting ROTOR_TOKEN (0: ROTOR_TOKEN).
		tokenFile os.FileMode
		want      string
	}{
		{"--url with user info", "http://u:hunter2@127.0.0.1:8787", "", 0, "--url"},
		{"--url past the last port", "http://127.0.0.1:65536", "", 0, "--url"},
		{"bridge.json not a record", "", "{not json", 0, "bridge.json is not a bridge record"},
		{"bridge.json without a url", "", `{"pid":%d,"url":""}`, 0, "bridge.json is not a bridge record"},
		{"bridge.token others can read", "http://127.0.0.1:8787", "", 0o644, "refusing to send its token"},
	}
	for _, tt := range tests {
		for _, cmd := range []string{"status", "bridge reload"} {
			t.Run(cmd+"/"+tt.name, func(t *testing.T) {
				env := map[string]string{"ROTOR_TOKEN": token}
				if tt.tokenFile != 0 {
					env = nil
				}
				f, out, _ := fakeFactory(t, nil, env)
				home, _ := f.EnsureHome()
				if tt.record != "" {
					rec := tt.record
					if strings.Contains(rec, "%d") {
						rec = fmt.Sprintf(rec, os.Getpid())
					}
					if err := os.WriteFile(filepath.Join(home, bridgeFileName), []byte(rec), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if tt.tokenFile != 0 {
					p := filepath.Join(home, "bridge.token")
					if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(p, tt.tokenFile); err != nil {
						t.Fatal(err)
					}
				}
				spy, asked := spyClient()
				var err error
				if cmd == "status" {
					err = statusRun(context.Background(), &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: spy, URL: tt.url, Format: FormatJSON})
				} else {
					err = reloadRun(context.Background(), &reloadOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: spy, Clock: f.Clock, URL: tt.url})
				}
				wantUsageError(t, cmd, err, tt.want)
				if asked.Load() {
					t.Errorf("rotor %s sent a request", cmd)
				}
				if s := fmt.Sprint(err) + out.String(); strings.Contains(s, "hunter2") || strings.Contains(s, token) {
					t.Errorf("rotor %s printed a secret: %s", cmd, s)
				}
			})
		}
	}
	// The last port is a port: rotor asks there.
	t.Run("--url port 65535", func(t *testing.T) {
		f, _, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": token})
		spy, asked := spyClient()
		err := statusRun(context.Background(), &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: spy, URL: "http://127.0.0.1:65535", Format: FormatJSON})
		if !asked.Load() || exitCode(err) != ExitError || !strings.Contains(fmt.Sprint(err), "no bridge answering at http://127.0.0.1:65535") {
			t.Errorf("status --url http://127.0.0.1:65535: asked %v, %v (exit %d); want a request, then exit 1 saying no bridge answers there", asked.Load(), err, exitCode(err))
		}
	})
}

// A --url that answers with a redirect (another listener on the same host,
// a port a local user may hold) never gets the token forwarded: rotor
// status and rotor bridge reload follow no redirect, and fail naming the
// answer.
func TestBridgeCommandsFollowNoRedirect(t *testing.T) {
	const token = "redirect-test-token-0123456789abcdef0123456789"
	var got atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(true)
	}))
	defer other.Close()
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, code)
		}))
		for _, cmd := range []string{"status", "bridge reload"} {
			f, _, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": token})
			var err error
			if cmd == "status" {
				err = statusRun(context.Background(), &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: f.HTTPClient, URL: bridge.URL, Format: FormatJSON})
			} else {
				err = reloadRun(context.Background(), &reloadOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: f.HTTPClient, Clock: f.Clock, URL: bridge.URL})
			}
			if got.Load() {
				t.Fatalf("rotor %s followed a %d redirect to another listener", cmd, code)
			}
			if exitCode(err) != ExitError || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("answered %d", code)) {
				t.Errorf("rotor %s answered %d: %v (exit %d), want exit 1 naming the answer", cmd, code, err, exitCode(err))
			}
		}
		bridge.Close()
	}
}

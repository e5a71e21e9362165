package bridge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

// POST /v1/admin/reload is the home's default token's only: another valid
// token is 403 admin_only and reloads nothing; another method is 405; a
// reload that fails with no *httpx.Error of its own is 500 internal_error.
func TestAdminReloadForTheDefaultTokenOnly(t *testing.T) {
	const admin = "rtr_admin-token-0123456789abcdefghijklmnopqrstuvw"
	ft := &fakeTokens{labels: map[[32]byte]string{secret.New(tok).Hash(): "ci", secret.New(admin).Hash(): "default"}, touched: map[string]time.Time{}}
	var reloads atomic.Int64
	var fail atomic.Bool
	_, srv, _ := setupConfig(t, Config{Runtime: http.NotFoundHandler(), Tokens: ft,
		AdminToken: func() ([32]byte, error) { return secret.New(admin).Hash(), nil },
		Reload: func(context.Context) (any, error) {
			reloads.Add(1)
			if fail.Load() {
				return nil, errors.New("disk on fire")
			}
			return map[string]int{"generation": 2}, nil
		}})
	for _, tt := range []struct {
		method, token string
		fail          bool
		status        int
		code, ctype   string
		reloads       int64
	}{
		{"POST", tok, false, 403, `"admin_only"`, "", 0},
		{"GET", admin, false, 405, `"method_not_allowed"`, "", 0},
		{"POST", admin, false, 200, `"generation":2`, "application/json", 1},
		{"POST", admin, true, 500, `"internal_error"`, "", 2},
	} {
		fail.Store(tt.fail)
		req, _ := http.NewRequest(tt.method, srv.URL+AdminReloadPath, nil)
		req.Header.Set("Authorization", "Bearer "+tt.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.code) || reloads.Load() != tt.reloads {
			t.Errorf("%s with %s token: %d %s, %d reloads; want %d %s, %d reloads", tt.method, map[bool]string{true: "the default", false: "another"}[tt.token == admin], resp.StatusCode, body, reloads.Load(), tt.status, tt.code, tt.reloads)
		}
		if tt.ctype != "" && resp.Header.Get("Content-Type") != tt.ctype {
			t.Errorf("Content-Type %q, want %s", resp.Header.Get("Content-Type"), tt.ctype)
		}
	}
}

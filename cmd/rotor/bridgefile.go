package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/tokenfile"
)

// bridgeFileName is the file in the home folder where a running bridge
// records itself, so that `rotor status` finds one started on a free port
// (shared/DESIGN.md, "Reload").
const bridgeFileName = "bridge.json"

// bridgeRecord is the content of <home>/bridge.json.
type bridgeRecord struct {
	PID int    `json:"pid"`
	URL string `json:"url"`
}

// writeBridgeRecord records a bridge that serves url. It returns a func
// that removes the record at a clean stop, unless another bridge has
// replaced it since; a record it replaced whose bridge still runs (a
// second bridge on one home) is put back instead, so that rotor status
// finds the first one again.
func writeBridgeRecord(home, url string) (remove func(), err error) {
	path := filepath.Join(home, bridgeFileName)
	prev, prevErr := readBridgeRecord(home)
	rec := bridgeRecord{PID: os.Getpid(), URL: url}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	return func() {
		if cur, err := readBridgeRecord(home); err != nil || cur != rec {
			return
		}
		if prevErr == nil && prev.PID != rec.PID && processAlive(prev.PID) {
			if b, err := json.Marshal(prev); err == nil && writeFileAtomic(path, append(b, '\n'), 0o600) == nil {
				return
			}
		}
		os.Remove(path)
	}, nil
}

// readBridgeRecord reads <home>/bridge.json; fs.ErrNotExist when no bridge
// recorded itself there.
func readBridgeRecord(home string) (bridgeRecord, error) {
	path := filepath.Join(home, bridgeFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return bridgeRecord{}, err
	}
	var rec bridgeRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.URL == "" {
		return bridgeRecord{}, fmt.Errorf("%s is not a bridge record; remove it, or pass --url", path)
	}
	return rec, nil
}

// bridgeClient asks a running bridge: no redirects.
var bridgeClient = &http.Client{CheckRedirect: decisions.NoRedirects}

// bridgeTarget is the running bridge a command asks (rotor status, rotor
// bridge reload): its URL, where that URL came from, and the client token.
type bridgeTarget struct {
	url   string // without a trailing slash
	from  string // " (from ...)", for the error when nothing answers
	token secret.Value
	// tokenFrom names where the token came from (ROTOR_TOKEN or the
	// file), for the error when the bridge refuses it.
	tokenFrom string
}

// refused is the error of a token the bridge answered 401: the user must
// change the token, exit 2, naming where it came from.
func (b *bridgeTarget) refused(body []byte) error {
	return usageErrorf("bridge at %s refused the token from %s (401 invalid_token): %s", b.url, b.tokenFrom, serverSays(body))
}

// findBridge finds the bridge to ask, as rotor status and rotor bridge
// reload both do: --url (flag), else the url in <home>/bridge.json, else
// http://<bridge.listen>; and the client token, ROTOR_TOKEN or
// bridge.token.
func findBridge(loadConfig func() (*config.Config, error), home func() (string, error), lookupEnv func(string) (string, bool), flag string) (*bridgeTarget, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	u, from, err := bridgeURL(home, cfg, flag)
	if err != nil {
		return nil, err
	}
	tok, tokenFrom, err := clientToken(lookupEnv, home)
	if err != nil {
		return nil, err
	}
	return &bridgeTarget{url: strings.TrimRight(u, "/"), from: from, token: tok, tokenFrom: tokenFrom}, nil
}

// request is a request to the bridge's path with the client token.
func (b *bridgeTarget) request(ctx context.Context, method, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.url+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token.Reveal())
	return req, nil
}

// unreachable is the error of a request no bridge answered.
func (b *bridgeTarget) unreachable(err error) error {
	return fmt.Errorf("no bridge answering at %s%s: %v", b.url, b.from, errors.Unwrap(err))
}

// clientToken is the token scripts use: ROTOR_TOKEN or bridge.token.
// It returns where the token came from: "ROTOR_TOKEN" or the file's path.
// A ROTOR_TOKEN of white space only, or holding a control character (which
// no header can carry), is refused without being echoed.
func clientToken(lookupEnv func(string) (string, bool), homeDir func() (string, error)) (secret.Value, string, error) {
	if v, ok := lookupEnv("ROTOR_TOKEN"); ok && v != "" {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
			return secret.Value{}, "", usageErrorf("ROTOR_TOKEN holds only white space: set it to a client token, or unset it to use bridge.token")
		case strings.ContainsFunc(v, unicode.IsControl):
			return secret.Value{}, "", usageErrorf("ROTOR_TOKEN holds a control character: set it to a client token as rotor printed it")
		}
		return secret.New(v), "ROTOR_TOKEN", nil
	}
	home, err := homeDir()
	if err != nil {
		return secret.Value{}, "", err
	}
	path := filepath.Join(home, "bridge.token")
	tok, err := tokenfile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return secret.Value{}, "", usageErrorf("no token at %s: set ROTOR_TOKEN, check --home, or run rotor init", path)
	}
	if err != nil {
		return secret.Value{}, "", tokenErr("refusing to send its token", err)
	}
	return tok, path, nil
}

// bridgeURL is the bridge to ask: --url, the record of a running bridge in
// the home folder, or bridge.listen. from says where a URL not given on the
// command line came from, for the error when nothing answers there.
func bridgeURL(homeDir func() (string, error), cfg *config.Config, flag string) (u, from string, err error) {
	if flag != "" {
		// Not echoed: user info would print its password.
		u, err := url.Parse(flag)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" || u.User != nil || !validPort(u.Port(), false) {
			return "", "", usageErrorf("--url: want the bridge's URL as rotor bridge start prints it, http://HOST:PORT (a port from 1 to 65535, no user info)")
		}
		return flag, "", nil
	}
	home, err := homeDir()
	if err != nil {
		return "", "", err
	}
	rec, err := readBridgeRecord(home)
	switch {
	case err == nil && !processAlive(rec.PID):
		// A bridge that did not stop cleanly: whatever listens on its
		// old port now is not it, and must not get the token.
		return "", "", fmt.Errorf("no bridge running: %s names pid %d, which is not running (a bridge that did not stop cleanly leaves it behind); remove it, or pass --url", filepath.Join(home, bridgeFileName), rec.PID)
	case err == nil:
		return rec.URL, fmt.Sprintf(" (from %s, pid %d; a bridge that did not stop cleanly leaves it behind)", filepath.Join(home, bridgeFileName), rec.PID), nil
	case errors.Is(err, fs.ErrNotExist):
		return "http://" + cfg.Bridge.Listen, " (bridge.listen; no bridge.json in " + home + ")", nil
	}
	return "", "", usageErrorf("%v", err)
}

// validPort reports whether port is a TCP port number: 1 to 65535, 0 too
// where zero picks a free one (a listen address); "" (none given) is valid
// only for a URL, which then takes its scheme's port.
func validPort(port string, listen bool) bool {
	if port == "" {
		return !listen
	}
	n, err := strconv.Atoi(port)
	return err == nil && n <= 65535 && (n > 0 || listen && n == 0 && port == "0")
}

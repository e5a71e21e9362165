package decisions

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// maxCatalogBytes bounds a catalog answer.
const maxCatalogBytes = 8 << 20

// catalogResult is one credential's discovered catalog.
type catalogResult struct {
	models  map[string]struct{}
	fetched time.Time
}

// catalogOutcome is how a catalog fetch ended.
type catalogOutcome int

const (
	catalogOK       catalogOutcome = iota
	catalogRejected                // 401 or 403: credential rejected
	catalogFailed                  // anything else: not eligible for this request
	catalogQuota                   // 429 permanent quota: credential rejected
)

// catalogs caches each credential's catalog for catalog_ttl and shares
// fetches in flight between requests.
type catalogs struct {
	clk     clock.Clock
	ttl     time.Duration
	timeout time.Duration
	client  *http.Client

	mu       sync.Mutex
	entries  map[string]*catalogResult // by credential name
	inflight map[string]*fetch
}

type fetch struct {
	done    chan struct{}
	res     *catalogResult
	outcome catalogOutcome
	status  int
}

func newCatalogs(clk clock.Clock, ttl, timeout time.Duration, client *http.Client) *catalogs {
	return &catalogs{clk: clk, ttl: ttl, timeout: timeout, client: client, entries: map[string]*catalogResult{}, inflight: map[string]*fetch{}}
}

// fresh returns the credential's catalog if it is fresh.
func (c *catalogs) fresh(name string) (*catalogResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.entries[name]
	if !ok || c.clk.Now().Sub(r.fetched) >= c.ttl {
		return nil, false
	}
	return r, true
}

// adopt copies prev's catalogs of the credentials keep names.
func (c *catalogs) adopt(prev *catalogs, keep func(string) bool) {
	prev.mu.Lock()
	defer prev.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, r := range prev.entries {
		if keep(name) {
			c.entries[name] = r
		}
	}
}

// Freshness reports when each credential's catalog was fetched (zero when
// never) for status pages.
func (c *catalogs) snapshot() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.entries))
	for k, v := range c.entries {
		out[k] = v.fetched
	}
	return out
}

// get returns a fresh catalog or fetches one, sharing a fetch already in
// flight. The fetch is bounded by catalog_timeout and by ctx.
func (c *catalogs) get(ctx context.Context, cr *credential) (*catalogResult, catalogOutcome, int) {
	if r, ok := c.fresh(cr.Name); ok {
		return r, catalogOK, http.StatusOK
	}
	c.mu.Lock()
	f, ok := c.inflight[cr.Name]
	if !ok {
		f = &fetch{done: make(chan struct{})}
		c.inflight[cr.Name] = f
		c.mu.Unlock()
		go c.run(cr, f)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-f.done:
		return f.res, f.outcome, f.status
	case <-ctx.Done():
		return nil, catalogFailed, 0
	}
}

// run fetches without the caller's context: other requests may share the
// fetch, so one caller's cancellation must not end it. catalog_timeout
// bounds it.
func (c *catalogs) run(cr *credential, f *fetch) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res, outcome, status := c.fetchOnce(ctx, cr)
	c.mu.Lock()
	if outcome == catalogOK {
		c.entries[cr.Name] = res
	}
	delete(c.inflight, cr.Name)
	c.mu.Unlock()
	f.res, f.outcome, f.status = res, outcome, status
	close(f.done)
}

func (c *catalogs) fetchOnce(ctx context.Context, cr *credential) (*catalogResult, catalogOutcome, int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cr.BaseURL+"/v1/models", nil)
	if err != nil {
		return nil, catalogFailed, 0
	}
	req.Header.Set("Authorization", "Bearer "+cr.Key.Reveal())
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, catalogFailed, 0
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, catalogRejected, resp.StatusCode
	case resp.StatusCode == http.StatusTooManyRequests:
		// A permanent quota (insufficient_quota and similar) rejects the
		// credential as it would at inference; any other 429 is a
		// catalog that could not be fetched.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
		if classify(resp.StatusCode, parseProviderError(b), "", "") == outcomeQuota {
			return nil, catalogQuota, resp.StatusCode
		}
		return nil, catalogFailed, resp.StatusCode
	case resp.StatusCode != http.StatusOK:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, catalogFailed, resp.StatusCode
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCatalogBytes+1))
	if err != nil || len(body) > maxCatalogBytes {
		return nil, catalogFailed, resp.StatusCode
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, catalogFailed, resp.StatusCode
	}
	models := make(map[string]struct{}, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			models[m.ID] = struct{}{}
		}
	}
	return &catalogResult{models: models, fetched: c.clk.Now()}, catalogOK, resp.StatusCode
}

// unsupported remembers, for five minutes, that a credential's provider
// answered a model's endpoint as unsupported (405, 501, or a 404 naming the
// model or endpoint, or without a structured error or one that says
// nothing).
type unsupported struct {
	clk clock.Clock
	ttl time.Duration
	mu  sync.Mutex
	m   map[capKey]time.Time
}

// capKey is an answer's key; credential is the credential's identity(), so
// that generations share the answers and a changed credential has none.
type capKey struct{ credential, model, endpoint string }

// UnsupportedTTL is how long an unsupported-endpoint answer is cached.
const UnsupportedTTL = 5 * time.Minute

func newUnsupported(clk clock.Clock) *unsupported {
	return &unsupported{clk: clk, ttl: UnsupportedTTL, m: map[capKey]time.Time{}}
}

func (u *unsupported) add(k capKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clk.Now()
	if len(u.m) > 10000 {
		for k, exp := range u.m {
			if !now.Before(exp) {
				delete(u.m, k)
			}
		}
	}
	u.m[k] = now.Add(u.ttl)
}

func (u *unsupported) has(k capKey) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	exp, ok := u.m[k]
	if !ok {
		return false
	}
	if !u.clk.Now().Before(exp) {
		delete(u.m, k)
		return false
	}
	return true
}

func (o catalogOutcome) String() string {
	return [...]string{"ok", "rejected", "failed", "quota"}[o]
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rotorhq/rotor/bridge"
	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/learnedstore"
	"github.com/rotorhq/rotor/pool"
)

// A reload (SIGHUP, POST /v1/admin/reload) reads rotor.yaml again and,
// when it validates and changes no restart-only key, builds a new route
// beside the running one and swaps it in: each request loads the current
// generation once, at its start, and finishes on it (shared/DESIGN.md,
// "Reload"). The generations share the cooldown store, the learned state,
// the budget admitter and the provider client; a credential whose name,
// pool, base_url, region and key bytes are unchanged keeps its catalog,
// its legacy rest and its unsupported-endpoint answers.

// credIdentity is what makes a credential the same across a reload.
type credIdentity struct {
	pool, baseURL, region string
	key                   secret.Value
}

func (a credIdentity) same(b credIdentity) bool {
	return a.pool == b.pool && a.baseURL == b.baseURL && a.region == b.region && a.key.Equal(b.key)
}

// generation is one applied configuration and the route built from it.
type generation struct {
	n   uint64
	cfg *config.Config
	// route and openai are nil without an in-process runtime.
	route  *decisions.Route
	openai http.Handler
	// creds are the usable credentials by name; pools the pools by name.
	creds map[string]credIdentity
	pools map[string]*pool.Pool
	// learner is this generation's learner (nil when off); its state
	// lives in the shared store.
	learner *learned.Learner
}

// routeShared is what every generation of the route shares.
type routeShared struct {
	mu       sync.Mutex
	pstore   *pool.Store
	lstore   learned.Store
	admitter *budgets.Admitter
	client   *http.Client
	// writeTimeout is the server's, fixed at start (serveOptions).
	writeTimeout time.Duration
}

// routeBuild collects one build of the route: the credentials it loads
// and the pools it makes, against the generation it replaces (prev, nil
// for the first).
type routeBuild struct {
	shared *routeShared
	prev   *generation
	creds  map[string]credIdentity
	pools  map[string]*pool.Pool
	// learner is the learner buildRoute wired in, nil when off.
	learner *learned.Learner
}

func newRouteBuild(shared *routeShared, prev *generation) *routeBuild {
	if shared == nil {
		shared = &routeShared{}
	}
	return &routeBuild{shared: shared, prev: prev, creds: map[string]credIdentity{}, pools: map[string]*pool.Pool{}}
}

// add records a usable credential of pool p.
func (b *routeBuild) add(p string, cr config.Credential, key secret.Value) {
	b.creds[cr.Name] = credIdentity{pool: p, baseURL: cr.BaseURL, region: cr.Region, key: key}
}

// keep reports whether credential name is unchanged since the previous
// generation. Names are unique across pools, and a pool's credentials are
// added before its pool is built, so it answers for every pool built so far.
func (b *routeBuild) keep(name string) bool {
	if b.prev == nil {
		return false
	}
	cur, ok := b.creds[name]
	old, had := b.prev.creds[name]
	return ok && had && cur.same(old)
}

func (b *routeBuild) prevPool(name string) *pool.Pool {
	if b.prev == nil {
		return nil
	}
	return b.prev.pools[name]
}

// prevLearner is the replaced generation's learner when cfg changes none
// of its settings (learned_cooldown.*, model_cooldown.max_seconds), else
// nil.
func (b *routeBuild) prevLearner(cfg *config.Config) *learned.Learner {
	if b.prev == nil || b.prev.learner == nil {
		return nil
	}
	old := b.prev.cfg
	if old.LearnedCooldown != cfg.LearnedCooldown || old.ModelCooldown.MaxSeconds != cfg.ModelCooldown.MaxSeconds {
		return nil
	}
	return b.prev.learner
}

func (b *routeBuild) prevRoute() *decisions.Route {
	if b.prev == nil {
		return nil
	}
	return b.prev.route
}

// poolStore is the one cooldown store of the process.
func (b *routeBuild) poolStore(clk clock.Clock) *pool.Store {
	s := b.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pstore == nil {
		s.pstore = pool.NewStore(clk, 0)
	}
	return s.pstore
}

// learnedStore is the one learned-state store of the process
// (learned_cooldown.storage needs a restart).
func (b *routeBuild) learnedStore(storage string, store ledger.Ledger) learned.Store {
	s := b.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lstore == nil {
		s.lstore = learned.NewMemoryStore(0)
		if storage == "sqlite" {
			s.lstore = learnedstore.New(store)
		}
	}
	return s.lstore
}

// admitter and client are shared so that budgets read once and idle
// provider connections are not left behind by an old generation.
func (b *routeBuild) admitter() *budgets.Admitter {
	s := b.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitter == nil {
		s.admitter = budgets.NewAdmitter()
		s.client = decisions.NewHTTPClient()
	}
	return s.admitter
}

func (b *routeBuild) client() *http.Client {
	b.admitter()
	return b.shared.client
}

// reloadResult is the answer of POST /v1/admin/reload: the generation now
// serving and what changed, credentials as pool/name.
type reloadResult struct {
	Generation uint64 `json:"generation"`
	// Runtime is "in-process", or the URL of the standalone runtime that
	// holds the pools (reload it with SIGHUP).
	Runtime  string   `json:"runtime"`
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
	Changed  []string `json:"changed"`
	Settings []string `json:"settings"`
}

// reloader holds the generation serving now and makes the next one.
type reloader struct {
	f       *Factory
	store   ledger.Ledger
	metrics *gateway.Metrics
	// withRoute is set when this process runs the runtime.
	withRoute bool
	shared    *routeShared

	mu  sync.Mutex // one reload at a time
	cur atomic.Pointer[generation]
}

func newReloader(f *Factory, cfg *config.Config, store ledger.Ledger, metrics *gateway.Metrics, withRoute bool) *reloader {
	return &reloader{f: f, store: store, metrics: metrics, withRoute: withRoute,
		shared: &routeShared{writeTimeout: serveOptions(cfg, f).WriteTimeout}}
}

// build makes the generation for cfg after prev (nil: the first).
func (rl *reloader) build(cfg *config.Config, prev *generation) (*generation, error) {
	g := &generation{n: 1, cfg: cfg}
	if prev != nil {
		g.n = prev.n + 1
	}
	if !rl.withRoute {
		return g, nil
	}
	b := newRouteBuild(rl.shared, prev)
	route, err := buildRoute(rl.f, cfg, rl.store, rl.metrics, b)
	if err != nil {
		return nil, err
	}
	g.route, g.openai, g.creds, g.pools, g.learner = route, route.OpenAI(), b.creds, b.pools, b.learner
	return g, nil
}

// start builds and serves the first generation.
func (rl *reloader) start(cfg *config.Config) error {
	g, err := rl.build(cfg, nil)
	if err != nil {
		return err
	}
	rl.cur.Store(g)
	return nil
}

func (rl *reloader) current() *generation { return rl.cur.Load() }

// decisions and openAI serve each request on the generation current at
// its start.
func (rl *reloader) decisions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rl.current().route.ServeHTTP(w, r) })
}

func (rl *reloader) openAI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rl.current().openai.ServeHTTP(w, r) })
}

// statusDocument is GET /v1/status: the route's document and the config
// generation, which each accepted reload increases.
type statusDocument struct {
	decisions.Status
	ConfigGeneration uint64 `json:"config_generation"`
}

func (rl *reloader) status(ctx context.Context, version string, list decisions.Budgets) any {
	g := rl.current()
	return statusDocument{Status: g.route.StatusDocument(ctx, version, list), ConfigGeneration: g.n}
}

// reload reads the configuration again and swaps in a new generation. A
// configuration that does not validate, or that changes a restart-only
// key, is refused with one log line naming the key and an *httpx.Error;
// the running generation keeps serving. via names the trigger in the log.
func (rl *reloader) reload(via string) (*reloadResult, error) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	log := rl.f.Logger()
	cur := rl.current()
	seen := len(rl.f.Malformed())
	cfg, err := rl.f.freshConfig()
	if err != nil {
		key := ""
		if fe, ok := errors.AsType[*config.FieldError](err); ok {
			key = fe.Field
		}
		log.Error("reload refused: the configuration does not validate; the running one is kept", "via", via, "config_key", key, "error", err)
		return nil, httpx.NewError(httpx.CodeConfigInvalid).WithParam(key).WithMessage("%v; the running configuration is kept", err)
	}
	var settings []string
	for _, k := range config.Changed(cur.cfg, cfg) {
		if config.RestartOnly(k) {
			if bad := malformedBehind(k, rl.f.Malformed()[min(seen, len(rl.f.Malformed())):]); len(bad) > 0 {
				// The key changed only because a malformed spec setting
				// turns its feature off (model_cooldown.enabled): name
				// what to fix, not a key the user never touched.
				log.Error("reload refused: a malformed setting would turn its feature off, which needs a restart; the running configuration is kept", "via", via, "config_key", bad[0], "restart_key", k)
				return nil, httpx.NewError(httpx.CodeConfigInvalid).WithParam(bad[0]).WithMessage("%s is malformed: at start it would turn %s off, which needs a restart; the running configuration is kept", bad[0], k)
			}
			log.Error("reload refused: the key needs a restart; the running configuration is kept", "via", via, "config_key", k)
			return nil, httpx.NewError(httpx.CodeRestartRequired).WithParam(k).WithMessage("%s changed: it needs a restart; the running configuration is kept", k)
		}
		if k != "pools" {
			settings = append(settings, k)
		} else {
			settings = append(settings, poolSettingsChanged(cur.cfg, cfg)...)
		}
	}
	g, err := rl.build(cfg, cur)
	if err != nil {
		log.Error("reload failed; the running configuration is kept", "via", via, "error", err)
		return nil, err
	}
	res := diffGenerations(cur, g)
	res.Settings = settings
	rl.cur.Store(g)
	rl.f.setLogLevel(cfg.Log.Level)
	log.Info("configuration reloaded", "via", via, "generation", g.n, "added", res.Added, "removed", res.Removed, "changed", res.Changed, "settings", res.Settings)
	return res, nil
}

// poolSettingsChanged names what a reload changed in pools besides the
// credentials' identities (diffGenerations reports those): a pool's
// options, and the visibility and model profiles of a credential it keeps
// (named as config names its keys, pools.api.credentials[0].visibility).
// They apply at once, so the reload must not say "no change".
func poolSettingsChanged(old, cur *config.Config) []string {
	var out []string
	for _, name := range cur.PoolNames() {
		op, ok := old.Pools[name]
		if !ok {
			continue
		}
		np := cur.Pools[name]
		base := "pools." + name
		if op.FirstKeyFallback != np.FirstKeyFallback {
			out = append(out, base+".first_key_fallback")
		}
		if op.AuthRest != np.AuthRest {
			out = append(out, base+".auth_rest")
		}
		if op.PreferActive != np.PreferActive {
			out = append(out, base+".prefer_active")
		}
		if !reflect.DeepEqual(op.QuotaBuckets, np.QuotaBuckets) {
			out = append(out, base+".quota_buckets")
		}
		for i, nc := range np.Credentials {
			k := slices.IndexFunc(op.Credentials, func(c config.Credential) bool { return c.Name == nc.Name })
			if k < 0 {
				continue
			}
			oc := op.Credentials[k]
			if !reflect.DeepEqual(oc.Visibility, nc.Visibility) {
				out = append(out, fmt.Sprintf("%s.credentials[%d].visibility", base, i))
			}
			if !reflect.DeepEqual(oc.ModelProfiles, nc.ModelProfiles) {
				out = append(out, fmt.Sprintf("%s.credentials[%d].model_profiles", base, i))
			}
		}
	}
	return out
}

// diffGenerations says which credentials (pool/name) a reload added,
// removed and changed.
func diffGenerations(old, cur *generation) *reloadResult {
	res := &reloadResult{Generation: cur.n, Added: []string{}, Removed: []string{}, Changed: []string{}, Settings: []string{}}
	for name, id := range cur.creds {
		o, ok := old.creds[name]
		switch {
		case !ok:
			res.Added = append(res.Added, id.pool+"/"+name)
		case !o.same(id):
			res.Changed = append(res.Changed, id.pool+"/"+name)
		}
	}
	for name, o := range old.creds {
		if _, ok := cur.creds[name]; !ok {
			res.Removed = append(res.Removed, o.pool+"/"+name)
		}
	}
	slices.Sort(res.Added)
	slices.Sort(res.Removed)
	slices.Sort(res.Changed)
	return res
}

// catchHangup catches SIGHUP from a server's start on: one that arrives
// before the server runs (an edit and a systemctl reload right after
// start) waits in the channel and reloads once watchHangup runs, instead
// of being dropped; never the default action, which terminates. release
// ignores SIGHUP again and stops catching it: a SIGHUP while the server
// finishes its stop (a reload racing a stop, a terminal closing) must not
// kill it before it removed bridge.json and closed the ledger.
func catchHangup() (ch chan os.Signal, release func()) {
	ch = make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() {
		signal.Ignore(syscall.SIGHUP)
		signal.Stop(ch)
	}
}

// watchHangup reloads rl on each SIGHUP caught in ch (catchHangup) until
// stop is called: a hangup (an SSH session closing, systemd's
// ExecReload) never stops a server.
func watchHangup(rl *reloader, ch <-chan os.Signal) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-ch:
				_, _ = rl.reload("SIGHUP") // it logs its outcome
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// malformedBehind returns the malformed spec settings of this load that
// change the restart-only key k by turning its feature off: a malformed
// model_cooldown setting turns model_cooldown.enabled off. Any other key's
// change is the user's own (a malformed setting elsewhere is no excuse).
func malformedBehind(k string, malformed []string) []string {
	var marks []string
	switch k {
	case "model_cooldown.enabled":
		marks = []string{"model_cooldown"}
	case "learned_cooldown.storage":
		// A malformed backend falls back to memory and turns learning off.
		marks = []string{"learned_cooldown.storage", "intelligence_storage_backend"}
	default:
		return nil
	}
	var out []string
	for _, m := range malformed {
		for _, mark := range marks {
			if strings.Contains(strings.ToLower(m), mark) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// adminReload is the bridge's POST /v1/admin/reload.
func (rl *reloader) adminReload(runtime string) func(context.Context) (any, error) {
	return func(context.Context) (any, error) {
		res, err := rl.reload("POST " + bridge.AdminReloadPath)
		if err != nil {
			return nil, err
		}
		res.Runtime = runtime
		return res, nil
	}
}

// freshConfig reads the configuration again, as Config did at start (same
// flags and environment). A fixed factory has no file to read: its Config
// func is the source, which tests replace.
func (f *Factory) freshConfig() (*config.Config, error) {
	if f.v == nil {
		return f.Config()
	}
	// A reload reads the file again: one it cannot read (moved aside) or
	// an empty one (caught mid-save by a save that truncates first) is no
	// request for the defaults, which would drop every pool.
	path, _, err := f.ConfigPath()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the configuration: %w", err)
	}
	if config.Blank(data) {
		// Only comments counts too: a save that truncates first, caught
		// after the starter's opening comments.
		return nil, fmt.Errorf("read the configuration: %s is empty or only comments (caught mid-save?): write a new file and rename it over the old one", path)
	}
	return f.loadConfig()
}

// setLogLevel applies a reloaded log.level to the one logger.
func (f *Factory) setLogLevel(level string) {
	var lv slog.Level
	if lv.UnmarshalText([]byte(level)) == nil {
		f.logLevel.Set(lv)
	}
}

// adminToken is the hash of the home's bridge.token, the one client token
// that may call the bridge's admin routes.
func adminToken(f *Factory) ([32]byte, error) {
	home, err := f.Home()
	if err != nil {
		return [32]byte{}, err
	}
	tok, err := tokenfile.Read(filepath.Join(home, "bridge.token"))
	if err != nil {
		return [32]byte{}, tokenErr("refusing to start", err)
	}
	return tok.Hash(), nil
}

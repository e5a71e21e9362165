package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/rotorhq/rotor/bridge"
	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// served is what a serving verb runs, built once by wire.
type served struct {
	// runtime is nil when the bridge forwards to a standalone runtime
	// elsewhere; bridge is nil for 'runtime start'.
	runtime *gateway.Server
	bridge  *bridge.Bridge
	// handler is what the verb serves: the bridge, or the runtime alone.
	handler http.Handler
	// reload applies the configuration file again (SIGHUP and the
	// bridge's POST /v1/admin/reload).
	reload *reloader
}

// wireSpec says what to build. The configs carry only what differs
// between the verbs (tokens, ports, hosts, origins, the runtime URL); wire
// fills in the route, status, metrics, logger and clock.
type wireSpec struct {
	// Runtime builds the runtime; with a Token it also serves on a socket
	// of its own (Handler).
	Runtime *gateway.Config
	// Bridge builds the bridge: in front of the runtime built here
	// (in-process, so Runtime is then required) unless it names a
	// RuntimeURL.
	Bridge *bridge.Config
}

// wire builds the servers a verb runs, each once: 'bridge start', 'runtime
// start' and the demo differ only in their spec. Close the bridge, if
// any, when done.
func wire(f *Factory, cfg *config.Config, store ledger.Ledger, metrics *gateway.Metrics, spec wireSpec) (*served, error) {
	out := &served{reload: newReloader(f, cfg, store, metrics, spec.Runtime != nil)}
	if err := out.reload.start(cfg); err != nil {
		return nil, err
	}
	if spec.Runtime != nil {
		rl := out.reload
		list := decisions.BudgetLister(store)
		rc := *spec.Runtime
		rc.Decisions, rc.OpenAI = rl.decisions(), rl.openAI()
		rc.Status = func(ctx context.Context) any { return rl.status(ctx, f.Version, list) }
		rc.Metrics, rc.Logger, rc.Clock = metrics, f.Logger(), f.Clock
		out.runtime = gateway.New(rc)
		metrics.WatchBudgets(budgetGauges(list), budgetStates)
	}
	if spec.Bridge != nil {
		bc := *spec.Bridge
		if bc.RuntimeURL == nil {
			bc.Runtime = out.runtime.InProcess()
		}
		bc.Tokens, bc.Logger, bc.Metrics, bc.Clock = store, f.Logger(), metrics, f.Clock
		bc.Reload = out.reload.adminReload(runtimeMode(cfg))
		out.bridge = bridge.New(bc)
		out.handler = out.bridge.Handler()
	} else {
		out.handler = out.runtime.Handler()
	}
	return out, nil
}

// budgetStates are the states /metrics exports a gauge for.
var budgetStates = []string{string(budgets.StateOK), string(budgets.StateExhausted), string(budgets.StateFailClosed)}

// budgetGauges turns the budget states into what /metrics exports.
func budgetGauges(list decisions.Budgets) func(context.Context) ([]gateway.BudgetGauge, error) {
	return func(ctx context.Context) ([]gateway.BudgetGauge, error) {
		sts, err := list(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]gateway.BudgetGauge, 0, len(sts))
		for _, st := range sts {
			// While a cost budget fails closed its used is unknown, as in
			// budget list.
			out = append(out, gateway.BudgetGauge{Name: st.Name, Kind: string(st.Kind), Used: st.Used, Limit: st.Limit,
				UsedUnknown: st.State == budgets.StateFailClosed, UnknownRows: st.UnknownRows, State: string(st.State)})
		}
		return out, nil
	}
}

// keyState says where a credential's key comes from (source: "env NAME"
// or "file PATH") and whether it is usable (state: "set", "not set",
// "missing", "unreadable", "empty" or "readable by others"); never the key.
type keyState struct{ source, state string }

func (k keyState) usable() bool { return k.state == "set" }

// String is the reason an unusable key is skipped: "env PROVIDER_KEY_A is
// not set".
func (k keyState) String() string { return k.source + " is " + k.state }

// loadKey reads a credential's key from its environment variable or file.
// It returns a zero secret when the key is not usable; the state says why.
func loadKey(lookup func(string) (string, bool), home string, cr config.Credential) (secret.Value, keyState) {
	if cr.APIKeyEnv != "" {
		k := keyState{source: "env " + cr.APIKeyEnv, state: "not set"}
		v, ok := lookup(cr.APIKeyEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return secret.Value{}, k
		}
		k.state = "set"
		return secret.New(strings.TrimSpace(v)), k
	}
	p := cr.APIKeyFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	k := keyState{source: "file " + p}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k.state = "missing"
	case err != nil:
		k.state = "unreadable"
	case tokenfile.OpenToOthers(fi):
		k.state = "readable by others"
	}
	if k.state != "" {
		return secret.Value{}, k
	}
	b, err := os.ReadFile(p)
	switch {
	case err != nil:
		k.state = "unreadable"
	case strings.TrimSpace(string(b)) == "":
		k.state = "empty"
	default:
		k.state = "set"
		return secret.New(strings.TrimSpace(string(b))), k
	}
	return secret.Value{}, k
}

// buildRoute wires pools, the learner and the Decisions route from the
// configuration; b carries what generations share and the one replaced.
func buildRoute(f *Factory, cfg *config.Config, store ledger.Ledger, metrics *gateway.Metrics, b *routeBuild) (*decisions.Route, error) {
	log := f.Logger()
	home, err := f.Home()
	if err != nil {
		return nil, err
	}
	clk := f.Clock
	if clk == nil {
		clk = clock.Real()
	}
	var learner *learned.Learner
	if prev := b.prevLearner(cfg); prev != nil {
		// The same settings keep the same learner: its warn-once
		// flags and what it remembers of siblings (a fall, refused
		// retries, a climb) live in it, not in the store.
		learner = prev
		b.learner = learner
	} else if cfg.LearnedCooldown.Mode != "off" {
		mode, policy := learned.ParseSettings(cfg.LearnedCooldown.Mode, cfg.LearnedCooldown.PolicyJSON, log)
		ls := b.learnedStore(cfg.LearnedCooldown.Storage, store)
		learner = learned.New(learned.Config{Mode: mode, Policy: policy, Store: ls, MaxSeconds: cfg.ModelCooldown.MaxSeconds, Adapt: cfg.LearnedCooldown.Adapt, Logger: log, Clock: clk})
		b.learner = learner
	}
	pstore := b.poolStore(clk)
	var pools []decisions.PoolConfig
	for _, name := range cfg.PoolNames() {
		pc := cfg.Pools[name]
		var dcreds []decisions.CredentialConfig
		var pcreds []pool.Credential
		var unusable []string
		for _, cr := range pc.EnabledCredentials() {
			key, ks := loadKey(f.LookupEnv, home, cr)
			if !ks.usable() {
				log.Warn("credential skipped: no key", "pool", name, "credential", cr.Name, "reason", ks.String())
				unusable = append(unusable, "credential "+cr.Name+": "+ks.String())
				continue
			}
			prof := map[string][]string{}
			for m, p := range cr.ModelProfiles {
				prof[m] = p.SupportedEndpoints
			}
			dcreds = append(dcreds, decisions.CredentialConfig{Name: cr.Name, Region: cr.Region, BaseURL: cr.BaseURL, Key: key,
				Allow: cr.Visibility.Allow, Deny: cr.Visibility.Deny, Profiles: prof})
			pcreds = append(pcreds, pool.Credential{Name: cr.Name, Key: key})
			b.add(name, cr, key)
		}
		var pl pool.Learner
		if learner != nil {
			pl = learner
		}
		p := pool.New(pool.Config{
			Options: pool.Options{Name: name, FirstKeyFallback: pc.FirstKeyFallback, AuthRest: pc.AuthRest, PreferActive: pc.PreferActive,
				CatalogTTL: cfg.CatalogTTL, QuotaBuckets: pc.QuotaBuckets},
			Credentials: pcreds,
			Settings:    pool.Settings{ModelCooldownEnabled: cfg.ModelCooldown.Enabled, MaxSeconds: cfg.ModelCooldown.MaxSeconds},
			Store:       pstore, Clock: clk, Learner: pl, Logger: log,
			Previous: b.prevPool(name), Keep: b.keep,
		})
		b.pools[name] = p
		pools = append(pools, decisions.PoolConfig{Name: name, Credentials: dcreds, Pool: p, Unusable: unusable})
	}
	router := decisions.New(decisions.Config{
		Pools: pools, Ledger: store, Admitter: b.admitter(), HTTPClient: b.client(), Clock: clk, Logger: log,
		Previous: b.prevRoute(), Keep: b.keep, WriteTimeout: b.shared.writeTimeout,
		Deadline: cfg.Runtime.Deadline, CatalogTTL: cfg.CatalogTTL, CatalogTimeout: cfg.CatalogTimeout,
		ErrorBodyIdle: cfg.Runtime.ErrorBodyIdle, MaxBuffered: cfg.Runtime.MaxBufferedMB << 20,
		ReservationGrace: cfg.Ledger.ReservationGrace, Metrics: metrics, UserAgent: "rotor/" + f.Version,
		GenerationDeadline: cfg.Runtime.GenerationDeadline, DefaultPool: cfg.Routes.DefaultPool, StreamIdleTimeout: cfg.Runtime.StreamIdleTimeout,
	})
	return router, nil
}

// openServingLedger opens the ledger with commit metrics.
func openServingLedger(ctx context.Context, f *Factory, cfg *config.Config, m *gateway.Metrics) (ledger.Ledger, error) {
	f.storeMu.Lock()
	defer f.storeMu.Unlock()
	store, err := f.openLedgerLocked(ctx, cfg, m.ObserveCommit)
	if err != nil {
		return nil, err
	}
	// A server records every request: on a ledger it cannot write it
	// would start, look healthy, and answer every request 503.
	if ro, ok := store.(interface{ ReadOnly() bool }); ok && ro.ReadOnly() {
		path, _ := f.DBPath()
		store.Close()
		f.store = nil
		return nil, fmt.Errorf("refusing to start: the ledger %s is read-only (check the file's permissions): every request is recorded there", path)
	}
	watchServing(m, store)
	return store, nil
}

package gateway

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rotorhq/rotor/internal/httpx"
)

// Metrics is rotor's Prometheus registry. One per process; the bridge and
// the runtime share it when they run together.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	refusals  *prometheus.CounterVec
	failovers *prometheus.CounterVec
	cooldowns *prometheus.CounterVec
	commits   prometheus.Histogram
	batch     prometheus.Histogram
	build     *prometheus.GaugeVec
	upstream  *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	cost      *prometheus.CounterVec
	// codes holds the codes not rotor's own (a provider's, passed
	// through) that rotor_requests_total has a series for.
	codes codeLabels
	// costUnknown counts settled rows whose cost is unknown, so that the
	// known cost is never read as the whole cost.
	costUnknown *prometheus.CounterVec
}

// NewMetrics returns a registry with rotor's metrics and the Go runtime's.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_requests_total", Help: "Requests answered, by server, route, status and error code.",
		}, []string{"server", "route", "status", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rotor_request_duration_seconds", Help: "Time to answer a request.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server", "route"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_refusals_total", Help: "Requests (Decisions and the OpenAI routes) refused before any provider call, by reason.",
		}, []string{"reason"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_failovers_total", Help: "Moves to another credential within a request, by pool and the reason the call before it let the request move on.",
		}, []string{"pool", "reason"}),
		cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_cooldowns_total", Help: "Cooldown evidence recorded, by pool and class (throttle, auth).",
		}, []string{"pool", "class"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rotor_ledger_commit_seconds", Help: "Ledger group-commit latency.",
			// A commit on a local disk takes tens of microseconds: the
			// low buckets tell its median from its checkpoint-laden tail.
			Buckets: []float64{.000025, .00005, .000075, .0001, .00015, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5},
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rotor_ledger_batch_writes", Help: "Writes per ledger commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		build: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rotor_build_info", Help: "Always 1; the labels say which rotor build serves.",
		}, []string{"version", "revision", "goversion"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_upstream_calls_total",
			Help: "Provider calls, by pool, credential (its name, never its key) and outcome (ok, auth, quota, rate_limited, unsupported, redirect, error, network_error, unreachable).",
		}, []string{"pool", "credential", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_tokens_total", Help: "Tokens of settled usage rows, by operation and kind (input, output, cached, reasoning); rows that did not report a kind add nothing to it.",
		}, []string{"operation", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_cost_usd_total", Help: "Known cost in USD of settled usage rows, by operation.",
		}, []string{"operation"}),
		costUnknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_cost_unknown_rows_total", Help: "Settled usage rows of unknown cost (not in rotor_cost_usd_total), by operation.",
		}, []string{"operation"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.refusals, m.failovers, m.cooldowns, m.commits, m.batch,
		m.build, m.upstream, m.tokens, m.cost, m.costUnknown,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetBuildInfo sets rotor_build_info: version and VCS revision as the
// binary's build info gives them (the revision may be empty).
func (m *Metrics) SetBuildInfo(version, revision string) {
	m.build.Reset()
	m.build.WithLabelValues(version, revision, runtime.Version()).Set(1)
}

// Upstream implements decisions.Metrics: one provider call and how it
// ended. credential is the credential's name, never its key.
func (m *Metrics) Upstream(pool, credential, outcome string) {
	m.upstream.WithLabelValues(pool, credential, outcome).Inc()
}

// Usage is one settled usage row as the ledger committed it; nil is an
// unknown value.
type Usage struct {
	Operation                        string
	Input, Output, Cached, Reasoning *int64
	CostMicros                       *int64
}

// Settled counts a settled usage row's known tokens and cost.
func (m *Metrics) Settled(u Usage) {
	for _, k := range []struct {
		kind string
		v    *int64
	}{{"input", u.Input}, {"output", u.Output}, {"cached", u.Cached}, {"reasoning", u.Reasoning}} {
		if k.v != nil && *k.v > 0 {
			m.tokens.WithLabelValues(u.Operation, k.kind).Add(float64(*k.v))
		}
	}
	if u.CostMicros == nil {
		m.costUnknown.WithLabelValues(u.Operation).Inc()
		return
	}
	m.cost.WithLabelValues(u.Operation).Add(float64(*u.CostMicros) / 1e6)
}

// Refused implements decisions.Metrics.
func (m *Metrics) Refused(reason string) { m.refusals.WithLabelValues(reason).Inc() }

// Failover implements decisions.Metrics.
func (m *Metrics) Failover(pool, reason string) { m.failovers.WithLabelValues(pool, reason).Inc() }

// Cooldown implements decisions.Metrics.
func (m *Metrics) Cooldown(pool, class string) { m.cooldowns.WithLabelValues(pool, class).Inc() }

// ObserveCommit records one ledger commit of n writes.
func (m *Metrics) ObserveCommit(n int, d time.Duration) {
	m.commits.Observe(d.Seconds())
	m.batch.Observe(float64(n))
}

// Request records an answered request.
func (m *Metrics) Request(server, route string, status int, code string, d time.Duration) {
	m.requests.WithLabelValues(server, route, strconv.Itoa(status), m.codes.label(code)).Inc()
	m.duration.WithLabelValues(server, route).Observe(d.Seconds())
}

// BudgetGauge is one budget as /metrics exports it.
type BudgetGauge struct {
	Name string
	// Kind is requests, tokens or cost: it names the unit of the metrics
	// (rotor_budget_used_requests, _tokens, _usd).
	Kind string
	// Used and Limit count requests, tokens, or micro-USD for cost.
	Used, Limit int64
	// UsedUnknown: the window holds usage of unknown cost (the budget
	// fails closed), so there is no used sample, never a misleading one.
	UsedUnknown bool
	// UnknownRows counts rows in the window of unknown tokens or cost.
	UnknownRows int64
	// State is the budget's current state, one of the states given to
	// WatchBudgets.
	State string
}

// WatchBudgets exports each budget's state at scrape time: used (unless
// unknown), limit, unknown rows, and 1 for its state among states (0 for
// the others).
func (m *Metrics) WatchBudgets(list func(context.Context) ([]BudgetGauge, error), states []string) {
	m.reg.MustRegister(budgetCollector{list: list, states: states})
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// budgetUnits maps a budget kind to the unit its metrics are named by,
// and the factor from the stored integer to that unit.
var budgetUnits = map[string]struct {
	unit  string
	scale float64
}{"requests": {"requests", 1}, "tokens": {"tokens", 1}, "cost": {"usd", 1e-6}}

var (
	budgetUsedDesc, budgetLimitDesc = map[string]*prometheus.Desc{}, map[string]*prometheus.Desc{}

	budgetStateDesc   = prometheus.NewDesc("rotor_budget_state", "1 for the budget's current state (ok, exhausted, fail-closed).", []string{"name", "state"}, nil)
	budgetUnknownDesc = prometheus.NewDesc("rotor_budget_unknown_rows", "Rows in the budget's current window whose tokens or cost are unknown.", []string{"name"}, nil)
)

func init() {
	for _, u := range budgetUnits {
		budgetUsedDesc[u.unit] = prometheus.NewDesc("rotor_budget_used_"+u.unit,
			"Used "+u.unit+" of a budget in its current window; absent while unknown (a cost budget failing closed).", []string{"name"}, nil)
		budgetLimitDesc[u.unit] = prometheus.NewDesc("rotor_budget_limit_"+u.unit, "Limit of a budget, in "+u.unit+".", []string{"name"}, nil)
	}
}

type budgetCollector struct {
	list   func(context.Context) ([]BudgetGauge, error)
	states []string
}

func (c budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, u := range budgetUnits {
		ch <- budgetUsedDesc[u.unit]
		ch <- budgetLimitDesc[u.unit]
	}
	ch <- budgetStateDesc
	ch <- budgetUnknownDesc
}

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sts, err := c.list(ctx)
	if err != nil {
		return
	}
	for _, st := range sts {
		u, ok := budgetUnits[st.Kind]
		if !ok {
			continue
		}
		if !st.UsedUnknown {
			ch <- prometheus.MustNewConstMetric(budgetUsedDesc[u.unit], prometheus.GaugeValue, float64(st.Used)*u.scale, st.Name)
		}
		ch <- prometheus.MustNewConstMetric(budgetLimitDesc[u.unit], prometheus.GaugeValue, float64(st.Limit)*u.scale, st.Name)
		ch <- prometheus.MustNewConstMetric(budgetUnknownDesc, prometheus.GaugeValue, float64(st.UnknownRows), st.Name)
		for _, s := range c.states {
			v := 0.0
			if st.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(budgetStateDesc, prometheus.GaugeValue, v, st.Name, s)
		}
	}
}

// maxOtherCodes bounds the code label's values that are not rotor's own:
// a provider chooses the codes rotor passes through, and each new one
// would be a new series for as long as the process runs.
const maxOtherCodes = 64

// otherCodes is the code label of every code past maxOtherCodes.
const otherCodes = "other"

// codeLabels keeps the code label bounded: rotor's own codes always, and
// the first maxOtherCodes others (a provider's codes, how a stream ended).
type codeLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *codeLabels) label(code string) string {
	if _, ok := httpx.Codes[code]; ok || code == "" {
		return code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[code] {
		return code
	}
	if len(c.seen) >= maxOtherCodes {
		return otherCodes
	}
	if c.seen == nil {
		c.seen = make(map[string]bool)
	}
	c.seen[code] = true
	return code
}

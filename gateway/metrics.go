package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
			Name: "rotor_refusals_total", Help: "Decisions requests refused before any provider call, by reason.",
		}, []string{"reason"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rotor_failovers_total", Help: "Moves to another credential within a request, by pool and reason.",
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
	}
	m.reg.MustRegister(m.requests, m.duration, m.refusals, m.failovers, m.cooldowns, m.commits, m.batch,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
	m.requests.WithLabelValues(server, route, strconv.Itoa(status), code).Inc()
	m.duration.WithLabelValues(server, route).Observe(d.Seconds())
}

// BudgetGauge is one budget as /metrics exports it.
type BudgetGauge struct {
	Name, Kind string
	// Unit is what Used and Limit count in ("requests", "micro_usd").
	Unit        string
	Used, Limit int64
	// State is the budget's current state, one of the states given to
	// WatchBudgets.
	State string
}

// WatchBudgets exports each budget's state at scrape time: used, limit,
// and 1 for its state among states (0 for the others).
func (m *Metrics) WatchBudgets(list func(context.Context) ([]BudgetGauge, error), states []string) {
	m.reg.MustRegister(budgetCollector{list: list, states: states})
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	budgetUsedDesc  = prometheus.NewDesc("rotor_budget_used", "Used amount of a budget in its current window, in its unit.", []string{"name", "kind", "unit"}, nil)
	budgetLimitDesc = prometheus.NewDesc("rotor_budget_limit", "Limit of a budget, in its unit.", []string{"name", "kind", "unit"}, nil)
	budgetStateDesc = prometheus.NewDesc("rotor_budget_state", "1 for the budget's current state (ok, exhausted, fail-closed).", []string{"name", "state"}, nil)
)

type budgetCollector struct {
	list   func(context.Context) ([]BudgetGauge, error)
	states []string
}

func (c budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- budgetUsedDesc
	ch <- budgetLimitDesc
	ch <- budgetStateDesc
}

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sts, err := c.list(ctx)
	if err != nil {
		return
	}
	for _, st := range sts {
		ch <- prometheus.MustNewConstMetric(budgetUsedDesc, prometheus.GaugeValue, float64(st.Used), st.Name, st.Kind, st.Unit)
		ch <- prometheus.MustNewConstMetric(budgetLimitDesc, prometheus.GaugeValue, float64(st.Limit), st.Name, st.Kind, st.Unit)
		for _, s := range c.states {
			v := 0.0
			if st.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(budgetStateDesc, prometheus.GaugeValue, v, st.Name, s)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/bridge"
	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/ledger"
)

type demoOptions struct {
	IO      *IOStreams
	Clock   clock.Clock
	Version string
	// HomeIgnored is set when --home, --db or --config was given: the demo says it
	// ignores them.
	HomeIgnored bool
	Requests    int
	// Keep is a new folder to run in and leave behind; empty means a
	// temporary folder removed at the end.
	Keep string
	// LogLevel and LogFormat are the demo's logger's (warn and text
	// unless --log-level or --log-format says otherwise).
	LogLevel, LogFormat string
}

func newCmdDemo(f *Factory, runF func(*demoOptions) error) *cobra.Command {
	opts := &demoOptions{IO: f.IO, Clock: f.Clock, Version: f.Version, LogLevel: "warn", LogFormat: "text"}
	cmd := &cobra.Command{
		Use:   "demo [--requests N] [--keep DIR]",
		Short: "Run rotor end to end against a built-in fake provider",
		Long: `Run the main job on an embedded default, with no account and no config: a fake
provider with three credentials (team-a and team-b have small hidden quotas,
so they get throttled for a while), a standalone runtime and a bridge on
free loopback ports. First a streamed chat completion through the bridge,
priced ('pricing set') and admitted by a cost budget, which is then removed
(a Decisions row has unknown cost, so a cost budget would refuse the rest);
then a requests budget and a burst of decisions through the bridge that
shows rotation, cooldowns, failover and the budget; the requests the budget
refuses leave no usage row. Then it reads the cooldowns from the bridge's
status, skips its own clock past them (no waiting) and shows a cooled
credential answer again. It prints what happened to each request, then the
ledger report with the known cost, and the command to run next.

The demo always runs in a home folder of its own and never touches yours
(--home, --db, --config and ROTOR_* are ignored): a temporary folder removed at the
end, or with --keep DIR a new folder DIR that stays for a look afterwards
('rotor ledger report --home DIR'). An existing DIR is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Requests < 1 || opts.Requests > 1000 {
				return usageErrorf("--requests must be from 1 to 1000, not %d", opts.Requests)
			}
			opts.HomeIgnored = cmd.Flags().Changed("home") || cmd.Flags().Changed("db") || cmd.Flags().Changed("config")
			if fl := cmd.Flags().Lookup("log-level"); fl != nil && fl.Changed {
				opts.LogLevel = fl.Value.String()
			}
			if fl := cmd.Flags().Lookup("log-format"); fl != nil && fl.Changed {
				opts.LogFormat = fl.Value.String()
			}
			if runF != nil {
				return runF(opts)
			}
			err := demoRun(cmd.Context(), opts)
			if err != nil && cmd.Context().Err() != nil {
				// Ctrl-C: the demo cleaned up after itself; the
				// cancelled context is no failure to report.
				fmt.Fprintln(opts.IO.ErrOut, "rotor: demo interrupted")
				return &SilentError{Code: 130}
			}
			return err
		},
	}
	intVar(cmd.Flags(), &opts.Requests, "requests", 12, "decisions to send (1 to 1000)")
	cmd.Flags().StringVar(&opts.Keep, "keep", "", "run in this new folder and leave it behind (refused if it exists)")
	return cmd
}

// demoCredentials are the fake provider's keys and how the demo scripts
// them.
var demoCredentials = []struct {
	name  string
	quota int
}{{"team-a", 3}, {"team-b", 3}, {"team-c", 0}}

func demoRun(ctx context.Context, opts *demoOptions) error {
	out := opts.IO.Out
	// Never the user's home or ledger: an exhausted demo budget and demo
	// tokens there would block their real bridge.
	if opts.HomeIgnored {
		fmt.Fprintln(opts.IO.ErrOut, "note: the demo runs in a home folder of its own; --home, --db and --config are ignored (--keep DIR keeps its files)")
	}
	if opts.Keep != "" {
		if abs, err := filepath.Abs(opts.Keep); err == nil {
			opts.Keep = abs
		}
	}
	home := opts.Keep
	if home == "" {
		dir, err := os.MkdirTemp("", "rotor-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		home = dir
	} else {
		// Mkdir, not MkdirAll: it fails on an existing folder, atomically.
		if err := os.MkdirAll(filepath.Dir(home), 0o700); err != nil {
			return usageErrorf("--keep %s: %v", home, err)
		}
		if err := os.Mkdir(home, 0o700); errors.Is(err, fs.ErrExist) {
			return usageErrorf("--keep %s: it exists; name a new folder (the demo never writes into an existing one)", home)
		} else if err != nil {
			return usageErrorf("--keep %s: %v", home, err)
		}
	}
	// The demo's own clock: it skips ahead past a cooldown rather than
	// wait for it. The fake provider's quota windows run on it too. It
	// starts demoLead behind real time, more than a skip (a cooldown of
	// the fake's one-minute quota window) can take, so that no row is
	// dated after real time: the report the demo ends with suggesting,
	// whose range ends now, sees all of them at once.
	clk := &demoClock{base: opts.Clock}
	clk.Skip(-demoLead)
	fp, err := fakeprovider.Start(fakeprovider.Options{Now: clk.Now})
	if err != nil {
		return err
	}
	defer fp.Close()
	keys := map[string]string{}
	cfg := config.Default()
	cfg.ModelCooldown = config.ModelCooldown{Enabled: true, MaxSeconds: 3600}
	cfg.Runtime.Deadline = 10 * time.Second
	api := config.Pool{AuthRest: config.DefaultAuthRest}
	for _, c := range demoCredentials {
		key := tokenfile.Generate().Reveal()
		env := "ROTOR_DEMO_KEY_" + strings.ToUpper(strings.ReplaceAll(c.name, "-", "_"))
		keys[env] = key
		fp.AddKey(key, "decide-mini", demoChatModel)
		if c.quota > 0 {
			fp.SetQuota(key, "decide-mini", fakeprovider.Quota{Requests: c.quota, Window: time.Minute, SendRetryAfter: true})
		}
		api.Credentials = append(api.Credentials, config.Credential{Name: c.name, Enabled: true, Region: "demo", BaseURL: fp.URL(), APIKeyEnv: env,
			ModelProfiles: map[string]config.ModelProfile{"decide-mini": {SupportedEndpoints: []string{"/v1/decisions"}}}})
	}
	cfg.Pools[config.PoolAPI] = api
	// The demo's own factory: its own home and database whatever --home,
	// --db or ROTOR_* say, and keys that exist only in this process.
	df := newFixedFactory(opts.IO, home, &cfg, keys, clk, NewLogger(opts.IO.ErrOut, opts.LogLevel, opts.LogFormat))
	df.Version = opts.Version
	defer df.Close()

	metrics := gateway.NewMetrics()
	store, err := openServingLedger(ctx, df, &cfg, metrics)
	if err != nil {
		return err
	}
	// The runtime, standalone, with its own token.
	rtLn, err := httpx.ListenLoopback("127.0.0.1:0", false)
	if err != nil {
		return err
	}
	rtTok := tokenfile.Generate()
	// The bridge in front of it, with a client token labelled "demo".
	brLn, err := httpx.ListenLoopback("127.0.0.1:0", false)
	if err != nil {
		return err
	}
	clientTok := tokenfile.Generate()
	if err := store.AddClientToken(ctx, "demo", clientTok.Hash(), true); err != nil {
		return err
	}
	rtURL, _ := url.Parse(listenURL(rtLn))
	w, err := wire(df, &cfg, store, metrics, wireSpec{
		Runtime: &gateway.Config{Token: rtTok, Port: portOf(rtLn)},
		Bridge:  &bridge.Config{RuntimeURL: rtURL, RuntimeToken: rtTok, Port: portOf(brLn)},
	})
	if err != nil {
		return err
	}
	defer w.bridge.Close()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() {
		httpx.Serve(sctx, rtLn, w.runtime.Handler(), httpx.ServeOptions{Drain: 5 * time.Second})
		done <- struct{}{}
	}()
	go func() {
		httpx.Serve(sctx, brLn, w.handler, httpx.ServeOptions{Drain: 5 * time.Second})
		done <- struct{}{}
	}()
	defer func() { stop(); <-done; <-done }()

	fmt.Fprintf(out, "rotor demo\n  fake provider  %s  credentials team-a (quota 3/min), team-b (quota 3/min), team-c\n", fp.URL())
	fmt.Fprintf(out, "  runtime        %s  (standalone, own token)\n", listenURL(rtLn))
	fmt.Fprintf(out, "  bridge         %s  (client token \"demo\")\n", listenURL(brLn))
	client := &http.Client{Timeout: 30 * time.Second}
	if err := demoCostPart(ctx, out, store, client, listenURL(brLn), clientTok, clk); err != nil {
		return err
	}

	// The chat row counts against the requests budget too.
	budgetLimit := int64(max(opts.Requests-2, 1) + 1)
	b := budgets.Budget{Name: "demo-requests", Kind: budgets.KindRequests, Limit: budgetLimit, Window: budgets.Window{Rolling: time.Hour}, CreatedAt: clk.Now()}
	if err := store.PutBudget(ctx, b.Record(), true); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nDecisions burst\n  budget         %s: at most %d requests per rolling hour (the chat above is one)\n  model cooldown on; every request asks for api/decide-mini\n\n", b.Name, b.Limit)

	recs := records{Columns: []string{"request", "status", "credential", "attempts", "total_tokens", "what_happened"}}
	last := ""
	var refused []demoResult
	for i := 1; i <= opts.Requests; i++ {
		r, err := demoDecide(ctx, client, listenURL(brLn), clientTok, i)
		if err != nil {
			return err
		}
		if r.attempts == 0 {
			refused = append(refused, r)
		}
		if r.attempts > 1 && last != "" {
			r.note = "failover: " + last + " was throttled (429) and now cools down"
		}
		if r.status == 200 {
			last = r.credential
		}
		recs.Rows = append(recs.Rows, []cell{intCell(int64(i)), intCell(int64(r.status)), textCell(r.credential), intCell(int64(r.attempts)), textCell(r.tokens), textCell(r.note)})
	}
	if err := recs.write(out, FormatTable); err != nil {
		return err
	}
	if err := demoRefusedPart(ctx, out, store, clk, refused); err != nil {
		return err
	}
	if err := demoCooldownPart(ctx, out, store, client, listenURL(brLn), clientTok, clk, b.Name, opts.Requests+1); err != nil {
		return err
	}
	rows, err := store.Report(ctx, ledger.ReportQuery{From: clk.Now().Add(-time.Hour), To: clk.Now().Add(time.Second), By: demoReportBy})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nledger report --by "+strings.Join(demoReportBy, ","))
	if err := reportRecords(demoReportBy, rows).write(out, FormatTable); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nThe priced chat has a known cost. Cost is unknown for Decisions (endpoint pricing is not configured): it is never counted as 0.")
	if opts.Keep != "" {
		fmt.Fprintf(out, "The demo's files stay in %s: rotor ledger report --home %s --by credential\n", opts.Keep, opts.Keep)
	}
	fmt.Fprintln(out, "\nNext, the Quick start (README.md) against a fake provider of your own: put rotor on your PATH\n"+
		"(go install ./cmd/rotor, into $(go env GOPATH)/bin), then follow it from rotor init; its\n"+
		"provider is rotor fake-provider --keys 2, in another shell.")
	return nil
}

// demoClock is the demo's clock: the clock it was given, plus the time it
// skipped ahead, so that a cooldown ends without the demo waiting for it.
// demoLead is how far behind real time the demo's clock starts.
const demoLead = 2 * time.Minute

type demoClock struct {
	base clock.Clock
	skip atomic.Int64 // nanoseconds
}

func (c *demoClock) Now() time.Time { return c.base.Now().Add(time.Duration(c.skip.Load())) }

func (c *demoClock) NewTimer(d time.Duration) clock.Timer { return c.base.NewTimer(d) }

// Skip moves the clock d ahead.
func (c *demoClock) Skip(d time.Duration) { c.skip.Add(int64(d)) }

// demoRefusedPart shows that a refused request left no usage row: the
// ledger has none under its request id.
func demoRefusedPart(ctx context.Context, out io.Writer, store ledger.Ledger, clk clock.Clock, refused []demoResult) error {
	if len(refused) == 0 {
		return nil
	}
	rows, err := store.Rows(ctx, clk.Now().Add(-time.Hour), clk.Now().Add(time.Second), 0)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.RequestID] = true
	}
	var nums []string
	inLedger := 0
	for _, r := range refused {
		nums = append(nums, strconv.Itoa(r.n))
		if ids[r.requestID] {
			inLedger++
		}
	}
	what := "no row"
	if inLedger > 0 {
		what = fmt.Sprintf("%d rows (unexpected)", inLedger)
	}
	subject := "Requests " + strings.Join(nums, ", ") + " were"
	if len(nums) == 1 {
		subject = "Request " + nums[0] + " was"
	}
	fmt.Fprintf(out, "\n%s refused at admission (%s), before any provider call.\n", subject, refused[0].code)
	fmt.Fprintf(out, "  A refusal is not a usage row: nothing reached a provider and nothing was spent, so the ledger holds %s\n  under their request ids (the first: %s) and the report below does not count them.\n", what, refused[0].requestID)
	return nil
}

// demoCooldownPart reads the cooldowns from the bridge's status (what
// rotor status shows), skips the demo's clock past the last one, frees
// the budget the burst used up and sends one more decision: a credential
// that cooled down answers again.
func demoCooldownPart(ctx context.Context, out io.Writer, store ledger.Ledger, c *http.Client, base string, tok secret.Value, clk *demoClock, budget string, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("demo status: %w", err)
	}
	var st decisions.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("demo status: %w", err)
	}
	now := clk.Now()
	var until time.Time
	cooled := map[string]bool{}
	var lines []string
	for _, p := range st.Pools {
		for _, cr := range p.Credentials {
			if cr.LatestRelease.After(now) {
				cooled[cr.Name] = true
				// The time left, not the time: the demo's clock runs
				// demoLead behind the wall clock.
				lines = append(lines, fmt.Sprintf("%s for %s more", cr.Name, cr.LatestRelease.Sub(now).Round(time.Second)))
				if cr.LatestRelease.After(until) {
					until = cr.LatestRelease
				}
			}
		}
	}
	if len(cooled) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nAfter the cooldown\n  rotor status   cooling down: %s\n", strings.Join(lines, ", "))
	skip := until.Sub(now).Truncate(time.Second) + time.Second
	clk.Skip(skip)
	fmt.Fprintf(out, "  the demo's clock skips %s ahead, past the cooldowns (it runs on a clock of its own: no waiting)\n", skip)
	if err := store.RemoveBudget(ctx, budget); err != nil {
		return err
	}
	fmt.Fprintf(out, "  budget remove  %s (the burst used it up)\n", budget)
	r, err := demoDecide(ctx, c, base, tok, n)
	if err != nil {
		return err
	}
	back := "no cooled credential answered"
	if cooled[r.credential] {
		back = r.credential + " is back after its cooldown"
	}
	fmt.Fprintf(out, "  request %d     %d via %s, %d attempt(s): %s\n", n, r.status, r.credential, r.attempts, back)
	return nil
}

// demoChatModel is the model of the demo's streamed chat, priced at
// demoChatPrice.
const demoChatModel = "gpt-4o-mini"

var (
	demoChatPrice = ledger.Price{Model: demoChatModel, InputMicros: 150_000, OutputMicros: 600_000, Source: ledger.SourceSet}
	demoReportBy  = []string{ledger.KeyOperation, ledger.KeyCredential, ledger.KeyStatus}
)

// demoCostPart prices the chat model, adds a cost budget, streams one chat
// through the bridge (admitted, its row priced at settlement) and removes
// the cost budget before the Decisions burst: every Decisions row has
// unknown cost, so a cost budget would refuse everything after it.
func demoCostPart(ctx context.Context, out io.Writer, store ledger.Ledger, c *http.Client, base string, tok secret.Value, clk clock.Clock) error {
	price := demoChatPrice
	price.Updated = clk.Now()
	if _, err := store.PutPrices(ctx, []ledger.Price{price}, true); err != nil {
		return err
	}
	cost := budgets.Budget{Name: "demo-cost", Kind: budgets.KindCost, Limit: 1_000_000, Window: budgets.Window{Rolling: time.Hour}, CreatedAt: clk.Now()}
	if err := store.PutBudget(ctx, cost.Record(), true); err != nil {
		return err
	}
	fmt.Fprintf(out, "  pricing set    %s --input %s --output %s (USD per 1M tokens)\n", demoChatModel, budgets.FormatCost(price.InputMicros), budgets.FormatCost(price.OutputMicros))
	fmt.Fprintf(out, "  budget         %s: at most $%s per rolling hour\n\n", cost.Name, budgets.FormatCost(cost.Limit))

	body := `{"model":"api/` + demoChatModel + `","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("demo chat: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("demo chat: status %d: %s", resp.StatusCode, b)
	}
	fmt.Fprintf(out, "Streamed chat (POST /v1/chat/completions, \"stream\": true, api/%s) via %s:\n  ", demoChatModel, resp.Header.Get("X-Rotor-Credential"))
	events := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		events++
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(data), &chunk)
		for _, ch := range chunk.Choices {
			fmt.Fprint(out, ch.Delta.Content) // each piece as it arrives
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("demo chat: %w", err)
	}
	fmt.Fprintf(out, "\n  %d events, no usage chunk (rotor asked for usage upstream and kept it for the ledger)\n", events)
	rows, err := store.Rows(ctx, clk.Now().Add(-time.Hour), clk.Now().Add(time.Second), 0)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Operation == "chat.completions" && r.CostMicros.Known {
			fmt.Fprintf(out, "  ledger row: %d input + %d output tokens, cost $%s (known: the model has a price)\n", r.InputTokens.V, r.OutputTokens.V, budgets.FormatCost(r.CostMicros.V))
		}
	}
	if err := store.RemoveBudget(ctx, cost.Name); err != nil {
		return err
	}
	fmt.Fprintf(out, "  admitted under %s, which is now removed: Decisions rows have unknown cost, so a cost budget would refuse them\n", cost.Name)
	return nil
}

type demoResult struct {
	n          int
	requestID  string
	code       string
	status     int
	credential string
	attempts   int
	tokens     string
	note       string
}

func demoDecide(ctx context.Context, c *http.Client, base string, tok secret.Value, i int) (demoResult, error) {
	body := fmt.Sprintf(`{"model":"api/decide-mini","input":"Request %d: is this invoice a duplicate?","question":{"type":"predicate"}}`, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/decisions", strings.NewReader(body))
	if err != nil {
		return demoResult{}, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return demoResult{}, fmt.Errorf("demo request %d: %w", i, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := demoResult{n: i, requestID: resp.Header.Get("X-Request-ID"), status: resp.StatusCode, credential: resp.Header.Get("X-Rotor-Credential")}
	fmt.Sscan(resp.Header.Get("X-Rotor-Attempts"), &r.attempts)
	if resp.StatusCode == 200 {
		var ans struct {
			Usage struct {
				Total int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(b, &ans)
		r.tokens = fmt.Sprint(ans.Usage.Total)
		r.note = "answered"
		return r, nil
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(b, &e)
	r.code = e.Error.Code
	r.note = e.Error.Code
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		r.note += " (retry after " + ra + "s)"
	}
	return r, nil
}

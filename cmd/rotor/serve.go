package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/bridge"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/ledger"
)

// listenErr maps a listen failure to the right exit status; a taken port
// says how to get a free one.
func listenErr(err error) error { return listenErrHint(err, "") }

// listenErrHint is listenErr with a guess at what holds a taken port.
func listenErrHint(err error, holder string) error {
	var le *httpx.ListenError
	if !errors.As(err, &le) || !le.Usage {
		return err
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		err = fmt.Errorf("%w: the port is taken%s; stop what holds it, or pass --listen 127.0.0.1:0 for a free port", err, holder)
	}
	return &UsageError{Err: err}
}

// serverListenErr is listenErr for the bridge and the runtime, which take
// --allow-non-loopback: a refused address says so, and a taken port that
// a rotor server may hold it.
func serverListenErr(err error) error {
	var le *httpx.ListenError
	if errors.As(err, &le) && le.NonLoopback {
		return &UsageError{Err: fmt.Errorf("%w (unless --allow-non-loopback is given)", err)}
	}
	return listenErrHint(err, " (by a rotor server already running? rotor status finds a bridge)")
}

// tokenErr maps a token file's error to the right exit status: an unsafe
// file (readable by others, a symlink) is the user's to fix, exit 2.
// refusing says what is refused ("refusing to start").
func tokenErr(refusing string, err error) error {
	if errors.Is(err, tokenfile.ErrUnsafe) {
		return &UsageError{Err: fmt.Errorf("%s: %w", refusing, err)}
	}
	return err
}

// serveOptions sizes the server's timeouts from the request deadline.
func serveOptions(cfg *config.Config, f *Factory) httpx.ServeOptions {
	return httpx.ServeOptions{
		ReadHeaderTimeout: cfg.Runtime.ReadHeaderTimeout,
		ReadTimeout:       cfg.Runtime.ReadTimeout,
		WriteTimeout:      cfg.Runtime.Deadline + 15*time.Second,
		Drain:             cfg.Runtime.ShutdownGrace,
		Logger:            f.Logger(),
	}
}

// listenURL returns the URL a local client reaches ln by: its address, or,
// when ln listens on every address (0.0.0.0 or ::, which no client can
// send to or name in Host), the IPv4 loopback address with its port (Go's
// wildcard listeners take IPv4 as well).
func listenURL(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return "http://" + ln.Addr().String()
}

func portOf(ln net.Listener) int {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// extraHosts lets a non-loopback listen address through the Host check.
func extraHosts(addr string) []string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" {
		return nil
	}
	return []string{h}
}

// startOptions are the options of 'runtime start' and 'bridge start'. The
// wiring takes the whole factory: a server needs every dependency. --listen
// and --runtime-url set config keys, so they arrive through f.Config.
type startOptions struct {
	f                *Factory
	AllowNonLoopback bool
}

func newCmdRuntime(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Run the runtime alone (the bridge runs it in-process by default)",
	}
	cmd.AddCommand(newCmdRuntimeStart(f, nil))
	return cmd
}

func newCmdRuntimeStart(f *Factory, runF func(*startOptions) error) *cobra.Command {
	opts := &startOptions{f: f}
	start := &cobra.Command{
		Use:   "start",
		Short: "Run the runtime on runtime.listen, requiring its own bearer token",
		Long: `Run the runtime alone on runtime.listen (default 127.0.0.1:8788). It serves
POST /v1/decisions and POST /decisions, the OpenAI routes (POST
/v1/responses, /v1/chat/completions, /v1/embeddings; GET /v1/models), GET
/healthz (no token), GET /metrics and GET /v1/status, and requires its own
bearer token: ROTOR_RUNTIME_TOKEN, or
the file runtime.token_file (default <home>/runtime.token, created with mode
0600 when missing). A bridge started with --runtime-url sends that token.

On start it prints one line to stdout: the URL it serves, with the real port
(--listen 127.0.0.1:0 picks a free one). SIGINT or SIGTERM stop it after
requests and streams in flight finish (up to runtime.shutdown_grace, then
they are cut) and the ledger is flushed: exit 0, or 1 when it had to cut.
SIGHUP reloads rotor.yaml without a restart (see 'rotor bridge reload').`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runtimeStartRun(cmd.Context(), opts)
		},
	}
	start.Flags().String("listen", "", "listen address (config runtime.listen)")
	start.Flags().BoolVar(&opts.AllowNonLoopback, "allow-non-loopback", false, "allow listening on a non-loopback address")
	f.bindFlag("runtime.listen", start.Flags().Lookup("listen"))
	return start
}

// runtimeToken reads ROTOR_RUNTIME_TOKEN or the token file, creating the
// file when create is set and it is missing.
func runtimeToken(f *Factory, cfg *config.Config, create bool) (secret.Value, string, error) {
	if v, ok := f.LookupEnv("ROTOR_RUNTIME_TOKEN"); ok && v != "" {
		if len(v) < 32 {
			return secret.Value{}, "", usageErrorf("ROTOR_RUNTIME_TOKEN is shorter than 32 characters")
		}
		return secret.New(v), "ROTOR_RUNTIME_TOKEN", nil
	}
	home, err := f.Home()
	if err != nil {
		return secret.Value{}, "", err
	}
	path := cfg.Runtime.TokenFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(home, path)
	}
	tok, err := tokenfile.Read(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if _, err := f.EnsureHome(); err != nil {
			return secret.Value{}, "", err
		}
		tok = tokenfile.Generate()
		if err := tokenfile.Write(path, tok, false); err != nil {
			return secret.Value{}, "", err
		}
		f.Logger().Info("created runtime token file", "path", path)
		return tok, path, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return secret.Value{}, "", usageErrorf("no runtime token: set ROTOR_RUNTIME_TOKEN or create %s (rotor runtime start creates it)", path)
	}
	if err != nil {
		return secret.Value{}, "", tokenErr("refusing to start", err)
	}
	return tok, path, nil
}

func runtimeStartRun(ctx context.Context, opts *startOptions) error {
	f := opts.f
	// SIGHUP reloads once the server runs (watchHangup); one that comes
	// before waits for it, never the default action, which terminates.
	hup, release := catchHangup()
	defer release()
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	// Bind first: a refused address must leave no token file behind.
	ln, err := httpx.ListenLoopback(cfg.Runtime.Listen, opts.AllowNonLoopback)
	if err != nil {
		return serverListenErr(err)
	}
	defer ln.Close()
	tok, _, err := runtimeToken(f, cfg, true)
	if err != nil {
		return err
	}
	metrics := gateway.NewMetrics()
	store, err := openServingLedger(ctx, f, cfg, metrics)
	if err != nil {
		return err
	}
	w, err := wire(f, cfg, store, metrics, wireSpec{Runtime: &gateway.Config{Token: tok, Port: portOf(ln),
		ExtraHosts: extraHosts(cfg.Runtime.Listen), AllowedOrigins: cfg.Runtime.AllowedOrigins}})
	if err != nil {
		return err
	}
	defer watchHangup(w.reload, hup)()
	return serveUntilDone(ctx, f, cfg, w.reload, "runtime", ln, w.handler)
}

func newCmdBridge(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Run the authenticated localhost bridge and manage its client tokens",
	}
	cmd.AddCommand(newCmdBridgeStart(f, nil), newCmdBridgeReload(f, nil), newCmdBridgeToken(f))
	return cmd
}

func newCmdBridgeStart(f *Factory, runF func(*startOptions) error) *cobra.Command {
	opts := &startOptions{f: f}
	start := &cobra.Command{
		Use:   "start",
		Short: "Run the bridge on bridge.listen with the runtime in-process",
		Long: `Run the authenticated bridge on bridge.listen (default 127.0.0.1:8787) in the
foreground. Clients send "Authorization: Bearer <token>": bridge.token in the
home folder (created with mode 0600 if missing; the bridge refuses to start
when it or the home folder is readable by others) or a token from
'rotor bridge token create'. The bridge refuses Host headers that are not a
loopback name or address with its port (DNS rebinding) and browser origins
not in bridge.allowed_origins.

The runtime runs in-process, or behind --runtime-url at a standalone
'rotor runtime start', which gets the runtime token (ROTOR_RUNTIME_TOKEN or
runtime.token_file).

On start it prints one line to stdout: the URL it serves, with the real port
(--listen 127.0.0.1:0 picks a free one), and records its pid and URL in
<home>/bridge.json, where 'rotor status' and 'rotor bridge reload' find
it. SIGHUP reloads rotor.yaml without a restart (requests in flight finish
on the configuration they started with). SIGINT or SIGTERM stop
accepting, let requests and streams in flight finish (up to
runtime.shutdown_grace, then cut them), flush the ledger, remove
bridge.json and exit 0 (1 when it had to cut requests). A taken port, an
unsafe token file or a bad config exit 2.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return bridgeStartRun(cmd.Context(), opts)
		},
	}
	start.Flags().String("listen", "", "listen address (config bridge.listen)")
	start.Flags().String("runtime-url", "", "forward to a standalone runtime at this URL (config bridge.runtime_url)")
	start.Flags().BoolVar(&opts.AllowNonLoopback, "allow-non-loopback", false, "allow listening on a non-loopback address")
	f.bindFlag("bridge.listen", start.Flags().Lookup("listen"))
	f.bindFlag("bridge.runtime_url", start.Flags().Lookup("runtime-url"))
	_ = start.Flags().SetAnnotation("runtime-url", allowEmpty, []string{"true"})
	return start
}

// ensureBridgeToken checks (or creates and registers) bridge.token.
func ensureBridgeToken(ctx context.Context, f *Factory) error {
	home, err := f.EnsureHome()
	if err != nil {
		return err
	}
	if err := tokenfile.CheckDir(home); err != nil {
		return tokenErr("refusing to start", err)
	}
	path := filepath.Join(home, "bridge.token")
	tok, err := tokenfile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		store, err := f.LedgerOrCreate(ctx)
		if err != nil {
			return err
		}
		label, err := createDefaultToken(ctx, func(context.Context) (ledger.Ledger, error) { return store, nil }, os.Hostname, path, false)
		if err != nil {
			return err
		}
		f.Logger().Info("created the default client token", "path", path, "label", label)
		return nil
	}
	if err != nil {
		return tokenErr("refusing to start", err)
	}
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		return err
	}
	if _, ok, err := store.LookupToken(ctx, tok.Hash()); err == nil && !ok {
		f.Logger().Warn("bridge.token is not registered in the ledger (revoked?); it will be refused; run rotor init --force for a new one", "path", path)
	}
	return nil
}

func bridgeStartRun(ctx context.Context, opts *startOptions) error {
	f := opts.f
	// SIGHUP reloads once the server runs (watchHangup); one that comes
	// before waits for it, never the default action, which terminates.
	hup, release := catchHangup()
	defer release()
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	var runtimeURL *url.URL
	var rtok secret.Value
	if cfg.Bridge.RuntimeURL != "" {
		if runtimeURL, err = url.Parse(cfg.Bridge.RuntimeURL); err != nil {
			return usageErrorf("--runtime-url: %v", err)
		}
		if rtok, _, err = runtimeToken(f, cfg, false); err != nil {
			return err
		}
	}
	ln, metrics, store, err := listenAndOpenLedger(ctx, f, cfg, cfg.Bridge.Listen, opts.AllowNonLoopback)
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := ensureBridgeToken(ctx, f); err != nil {
		return err
	}
	spec := wireSpec{Bridge: &bridge.Config{RuntimeURL: runtimeURL, RuntimeToken: rtok, Port: portOf(ln), WriteIdle: serveOptions(cfg, f).WriteTimeout,
		ExtraHosts: extraHosts(cfg.Bridge.Listen), AllowedOrigins: cfg.Bridge.AllowedOrigins,
		AdminToken: func() ([32]byte, error) { return adminToken(f) }}}
	if runtimeURL == nil {
		spec.Runtime = &gateway.Config{}
	}
	w, err := wire(f, cfg, store, metrics, spec)
	if err != nil {
		return err
	}
	defer w.bridge.Close()
	home, err := f.Home()
	if err != nil {
		return err
	}
	// Recorded before the URL line goes out, so a script that read the
	// line finds the record; removed at a clean stop.
	removeRecord, err := writeBridgeRecord(home, listenURL(ln))
	if err != nil {
		return err
	}
	defer removeRecord()
	defer watchHangup(w.reload, hup)()
	return serveUntilDone(ctx, f, cfg, w.reload, "bridge", ln, w.handler, "runtime", runtimeMode(cfg))
}

// listenAndOpenLedger binds addr (loopback unless allowed otherwise) and
// opens the ledger with commit metrics, the first steps of both servers.
func listenAndOpenLedger(ctx context.Context, f *Factory, cfg *config.Config, addr string, allowNonLoopback bool) (net.Listener, *gateway.Metrics, ledger.Ledger, error) {
	ln, err := httpx.ListenLoopback(addr, allowNonLoopback)
	if err != nil {
		return nil, nil, nil, serverListenErr(err)
	}
	metrics := gateway.NewMetrics()
	store, err := openServingLedger(ctx, f, cfg, metrics)
	if err != nil {
		ln.Close()
		return nil, nil, nil, err
	}
	return ln, metrics, store, nil
}

// serveUntilDone prints the listening URL on stdout (scripts read it), logs
// the start with the cooldown settings in force, and serves until ctx ends,
// then drains for the runtime.shutdown_grace in force (a reload may have
// changed it).
func serveUntilDone(ctx context.Context, f *Factory, cfg *config.Config, rl *reloader, name string, ln net.Listener, h http.Handler, attrs ...any) error {
	procs, cpus := serverProcs(f)
	fmt.Fprintln(f.IO.Out, listenURL(ln))
	attrs = append([]any{"url", listenURL(ln)}, attrs...)
	if path, err := f.DBPath(); err == nil {
		attrs = append(attrs, "ledger", dburl.Mask(path))
	}
	attrs = append(attrs, "model_cooldown", cfg.ModelCooldown.Enabled, "learned_cooldown", cfg.LearnedCooldown.Mode, "gomaxprocs", procs, "cpus", cpus)
	f.Logger().Info(name+" started", attrs...)
	if path, _, err := f.ConfigPath(); err == nil && servesNothing(cfg, name) {
		// Every request would be 503 no_credentials with nothing saying
		// why: a bridge started before rotor init, or after it with the
		// pools: section left empty.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			f.Logger().Warn("no rotor.yaml: running on the defaults, which have no credentials; every request gets 503 no_credentials until you run rotor init, add credentials under pools: and reload", "config", path)
		} else {
			f.Logger().Warn("no enabled credential in rotor.yaml: every request gets 503 no_credentials until you add one under pools: (rotor fake-provider prints a section to try) and reload", "config", path)
		}
	}
	o := serveOptions(cfg, f)
	o.DrainNow = func() time.Duration { return rl.current().cfg.Runtime.ShutdownGrace }
	err := httpx.Serve(ctx, ln, h, o)
	f.Logger().Info(name + " stopped")
	return err
}

// servesNothing reports whether a server on cfg has no enabled credential
// to send to: a bridge in front of a standalone runtime sends to none of
// its own.
func servesNothing(cfg *config.Config, server string) bool {
	if server == "bridge" && cfg.Bridge.RuntimeURL != "" {
		return false
	}
	for _, p := range cfg.Pools {
		if len(p.EnabledCredentials()) > 0 {
			return false
		}
	}
	return true
}

// serverProcs gives a server half the CPUs Go would run it on (at least
// one) unless GOMAXPROCS is set, and returns that number and Go's. A bridge
// is local by design: its callers, and often the tools behind them, run on
// the same machine. There a server on every core mostly buys goroutine
// hand-offs across cores, each a thread wake-up; on this project's 2-core
// machine one thread cut the bridge's CPU per request by a quarter and its
// one-client latency by a sixth (README, "Performance").
func serverProcs(f *Factory) (procs, cpus int) {
	cpus = runtime.GOMAXPROCS(0)
	if v, ok := f.LookupEnv("GOMAXPROCS"); ok && v != "" {
		return cpus, cpus
	}
	procs = max(1, cpus/2)
	runtime.GOMAXPROCS(procs)
	return procs, cpus
}

func runtimeMode(cfg *config.Config) string {
	if cfg.Bridge.RuntimeURL != "" {
		return cfg.Bridge.RuntimeURL
	}
	return "in-process"
}

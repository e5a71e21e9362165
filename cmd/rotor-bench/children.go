package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rotorhq/rotor/internal/fakeprovider"
)

// Environment of the child processes this binary starts of itself.
const (
	// envProviderKeys lists the fake provider's API keys, comma-separated.
	envProviderKeys = "ROTOR_BENCH_PROVIDER_KEYS"
	// envBareKey is the provider key the bare proxy sends upstream.
	envBareKey = "ROTOR_BENCH_BARE_KEY"
	// envStreamEvents is the number of text deltas of the fake provider's
	// chat streams.
	envStreamEvents = "ROTOR_BENCH_STREAM_EVENTS"
)

// The provider models: benchModel answers Decisions, streamModel streams
// chat, stallModel's streams stall after their first events.
const (
	benchModel  = "decide-mini"
	streamModel = "chat-mini"
	stallModel  = "chat-stall"
)

// stallAfter is the number of events a stalled stream sends before it
// stalls: the role chunk and one delta.
const stallAfter = 2

// startTimeout bounds how long a child may take to print its URL.
const startTimeout = 30 * time.Second

// stopTimeout bounds a child's clean shutdown before it is killed.
const stopTimeout = 30 * time.Second

// serveProviderMain runs the fake provider with recording off (its memory
// stays flat over long runs), the default ~1 KB answers with usage, chat
// streams of $ROTOR_BENCH_STREAM_EVENTS deltas, and stallModel's streams
// stalled.
func serveProviderMain(ctx context.Context, stdout io.Writer) error {
	keys := strings.Split(os.Getenv(envProviderKeys), ",")
	events, _ := strconv.Atoi(os.Getenv(envStreamEvents))
	p, err := fakeprovider.Start(fakeprovider.Options{DisableRecording: true, StreamEvents: events})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k != "" {
			p.AddKey(k, benchModel, streamModel, stallModel)
			p.SetDefault(k, stallModel, fakeprovider.StreamStall(stallAfter))
		}
	}
	fmt.Fprintln(stdout, p.URL())
	waitForEnd(ctx)
	return p.Close()
}

// serveBareProxyMain runs the floor: an httputil.ReverseProxy that only
// swaps the caller's Authorization for the provider key, as any Go proxy
// holding a key must. Chat requests (the stream cells) go through a second
// one that reads the request body first, as any router by model must (a
// body passed through cuts about 1 in 10 streams under load,
// golang/go#40747), and flushes every write (FlushInterval -1).
func serveBareProxyMain(ctx context.Context, stdout io.Writer, target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("-serve-bare-proxy: %w", err)
	}
	auth := "Bearer " + os.Getenv(envBareKey)
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
			pr.Out.Header.Set("Authorization", auth)
		},
		Transport: tr,
		ErrorLog:  log.New(os.Stderr, "bare proxy: ", 0),
	}
	streams := *rp
	streams.FlushInterval = -1
	mux := http.NewServeMux()
	mux.Handle("/", rp)
	mux.HandleFunc(chatPath, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		streams.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintln(stdout, "http://"+ln.Addr().String())
	waitForEnd(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-done
	return err
}

// waitForEnd returns on SIGINT/SIGTERM or when stdin closes (the parent
// holds the write end, so its death ends the child too).
func waitForEnd(ctx context.Context) {
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
}

// child is a process that prints its URL as its first stdout line.
type child struct {
	name  string
	log   string // its stderr
	cmd   *exec.Cmd
	url   string
	stdin io.WriteCloser
	done  chan struct{}
	err   error // set before done closes
	// termIsStop: a death by SIGTERM after stop sent one is a clean stop.
	// True for the fake provider and the bare proxy, which hold nothing
	// to flush: the parent's SIGTERM races the stdin it closes, and a
	// SIGTERM delivered after the child restored the default action (as
	// it returns from main; in a race-built child even SIG_IGN does not
	// hold at exit) kills it. False for rotor, whose clean exit matters.
	termIsStop bool
	stopSent   bool
}

// startChild starts cmd, sends its stderr to logPath and waits for the
// first stdout line, its URL.
func startChild(ctx context.Context, name string, cmd *exec.Cmd, logPath string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, log: logPath, cmd: cmd, stdin: in, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		line, _ := br.ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, br)
	}()
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	fail := func(err error) (*child, error) {
		c.stop()
		return nil, fmt.Errorf("%s: %w%s", name, err, logTail(logPath))
	}
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "http://") {
			return fail(fmt.Errorf("printed %q, not its URL", line))
		}
		c.url = line
		return c, nil
	case <-c.done:
		return fail(fmt.Errorf("exited before printing its URL: %v", c.err))
	case <-timer.C:
		return fail(errors.New("no URL after " + startTimeout.String()))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// stop sends SIGTERM and waits for a clean exit, killing the child after
// stopTimeout. It reports a non-zero exit.
func (c *child) stop() error {
	select {
	case <-c.done:
		return c.exitErr()
	default:
	}
	c.stopSent = true
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", c.name, stopTimeout)
	}
	return c.exitErr()
}

func (c *child) exitErr() error {
	var ee *exec.ExitError
	if c.termIsStop && c.stopSent && errors.As(c.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	if c.err != nil {
		return fmt.Errorf("%s: %w%s", c.name, c.err, logTail(c.log))
	}
	return nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// logTail returns the end of a child's log for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n--- " + path + " ---\n" + strings.TrimRight(string(b), "\n")
}

// childEnv is the environment minus variables that would change a
// child's behaviour behind the benchmark's back (rotor's own settings, the
// spec's cooldown settings, proxies), plus extra. Go runtime variables
// (GOMAXPROCS, GOGC...) pass through on purpose, for experiments.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ROTOR_"), strings.HasPrefix(k, "MODEL_COOLDOWN_"), strings.HasPrefix(k, "LEARNED_COOLDOWN_"),
			k == "INTELLIGENCE_STORAGE_BACKEND", strings.EqualFold(k, "http_proxy"), strings.EqualFold(k, "https_proxy"),
			strings.EqualFold(k, "all_proxy"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

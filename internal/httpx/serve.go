package httpx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// ServeOptions are the server's timeouts. Zero values take the defaults.
type ServeOptions struct {
	// ReadHeaderTimeout closes connections that dribble headers
	// (slowloris). Default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. Default
	// 30s.
	ReadTimeout time.Duration
	// WriteTimeout must outlast the request deadline. Default 75s.
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes; default 64 KiB.
	MaxHeaderBytes int
	// Drain is how long shutdown waits for requests in flight (streams
	// included: runtime.shutdown_grace) before it cuts them: their
	// contexts are cancelled with ErrServerShutdown, and they get Settle
	// to finish (write their ledger rows) before connections close.
	// Default 75s.
	Drain time.Duration
	// DrainNow, when set, gives Drain at the moment shutdown starts (a
	// reload may have changed it); a value of 0 or less keeps Drain.
	DrainNow func() time.Duration
	// Settle is how long requests cut at shutdown get to finish. Default
	// 5s.
	Settle time.Duration
	Logger *slog.Logger
}

func (o *ServeOptions) defaults() {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 5 * time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 75 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.Drain <= 0 {
		o.Drain = 75 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrServerShutdown is the cause a request's context carries when shutdown
// cut it after the drain: handlers tell it from a caller that went away
// (context.Cause), so a stream's row says server_shutdown.
var ErrServerShutdown = errors.New("server shutting down")

// Serve serves h on ln until ctx is done, then stops accepting and waits
// up to Drain for requests in flight; requests still running are then
// cancelled with ErrServerShutdown and get Settle to finish before their
// connections close.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	o.defaults()
	// Requests outlive ctx (they drain); base is cancelled only when the
	// drain ends.
	base, cut := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cut(nil)
	// running counts requests in handlers: a drain that runs out while
	// only connections without a request remain (one just opened, its
	// headers not yet sent) cut nothing.
	var running atomic.Int64
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		defer running.Add(-1)
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{
		Handler:           counted,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          log.New(slogWriter{o.Logger}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return base },
		// "OPTIONS *" reaches the handler (the guard) too, not net/http's
		// own empty 200.
		DisableGeneralOptionsHandler: true,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if o.DrainNow != nil {
		if d := o.DrainNow(); d > 0 {
			o.Drain = d
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.Drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) && running.Load() == 0 {
		// Only connections without a request in a handler were left
		// (one just opened, its headers not all sent): nothing was cut.
		// A request that reaches a handler from here on finds its
		// context cancelled.
		cut(ErrServerShutdown)
		srv.Close()
		err = nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		cut(ErrServerShutdown)
		settle, cancelSettle := context.WithTimeout(context.Background(), o.Settle)
		defer cancelSettle()
		if srv.Shutdown(settle) != nil {
			// Close fails the writes of handlers blocked on a caller that
			// stopped reading; only then do they write their rows. Wait
			// for them (Settle again, 2s at least), so that the caller
			// does not close the ledger under them (a cut stream left
			// unsettled).
			srv.Close()
			for end := time.Now().Add(max(o.Settle, 2*time.Second)); running.Load() > 0 && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		return fmt.Errorf("shutdown: requests still running after %s were cut off", o.Drain)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// slogWriter sends net/http's own error log (TLS handshakes, bad
// requests) to slog at debug level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("http server", "message", string(p))
	return len(p), nil
}

// Recover turns a handler panic into a generic 500 and a log line under
// the request id. The panic value is not echoed to the caller.
func Recover(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				logger.Error("handler panicked", "request_id", RequestID(r.Context()), "path", r.URL.Path, "panic_type", fmt.Sprintf("%T", p))
				WriteError(w, NewError(CodeInternal))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// Healthz is GET /healthz on every rotor server: it answers without a
// token and without secrets.
func Healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// StatusRecorder captures the status an answer was sent with.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
	Bytes  int64
	// Code is the error code of an answer WriteError wrote through it
	// (the guard's refusals among them), for the access log and metrics.
	Code string
}

// WriteHeader records the status.
func (s *StatusRecorder) WriteHeader(code int) {
	if s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.Bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush implements http.Flusher.
func (s *StatusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack implements http.Hijacker.
func (s *StatusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := s.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("hijack not supported")
}

// ListenLoopback listens on addr, refusing a non-loopback address unless
// allowNonLoopback is set. It returns a *ListenError for a taken port.
func ListenLoopback(addr string, allowNonLoopback bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &ListenError{Addr: addr, Err: err}
	}
	if !allowNonLoopback && !LoopbackHost(host) {
		return nil, &ListenError{Addr: addr, Err: errors.New("not a loopback address; rotor listens on loopback only"), Usage: true, NonLoopback: true}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ListenError{Addr: addr, Err: err, Usage: isAddrInUse(err)}
	}
	if !allowNonLoopback && !boundToLoopback(ln) {
		// A loopback name (localhost, *.localhost) that the resolver
		// maps to another address (/etc/hosts) is checked by what it
		// bound, not by its name.
		ln.Close()
		return nil, &ListenError{Addr: addr, Err: fmt.Errorf("resolves to %s, not a loopback address; rotor listens on loopback only", ln.Addr()), Usage: true, NonLoopback: true}
	}
	return ln, nil
}

// boundToLoopback reports whether ln listens on a loopback address only.
func boundToLoopback(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// ListenError is a listen failure; Usage marks ones the user fixes (port
// taken, address refused).
type ListenError struct {
	Addr  string
	Err   error
	Usage bool
	// NonLoopback: the address is not loopback, and was not allowed.
	NonLoopback bool
}

func (e *ListenError) Error() string { return fmt.Sprintf("listen on %s: %v", e.Addr, e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }

package decisions

import (
	"bytes"
	"log/slog"
	"sync"
)

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func newTestLogger(b *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(&syncWriter{b: b}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

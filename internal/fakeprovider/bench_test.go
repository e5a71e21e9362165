package fakeprovider

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkDecisionOK measures the default 200 path over loopback, with
// recording off as in rotor's throughput benchmark.
func BenchmarkDecisionOK(b *testing.B) {
	s, err := Start(Options{DisableRecording: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.AddKey(keyA, "decide-mini")
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	body := []byte(predicateBody)
	url := s.URL() + PathDecisions
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+keyA)
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkAppendAnswer measures building one 200 answer.
func BenchmarkAppendAnswer(b *testing.B) {
	q := decisionRequest{Question: &questionSpec{Type: "predicate"}}
	q.Input.present = true
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for i := range b.N {
		buf = appendAnswer(buf[:0], uint64(i), "decide-mini", 1700000000, &q, 80, DefaultAnswerSize)
	}
}

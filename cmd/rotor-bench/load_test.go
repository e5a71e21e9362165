package main

import (
	"math"
	"testing"
)

// The ledger table's p50 commit comes from the bucket counts that moved
// during a cell, interpolated as Prometheus' histogram_quantile does.
func TestCommitP50FromBucketDeltas(t *testing.T) {
	const h = "rotor_ledger_commit_seconds"
	series := func(counts ...float64) map[string]float64 {
		les := []string{"2.5e-05", "5e-05", "7.5e-05", "0.0001", "+Inf"}
		m := map[string]float64{h + "_count": counts[len(counts)-1], h + "_sum": 1, "rotor_ledger_batch_writes_sum": 1}
		for i, le := range les {
			m[h+`_bucket{le="`+le+`"}`] = counts[i]
		}
		// Another histogram's buckets must not count.
		m[`rotor_request_duration_seconds_bucket{le="5e-05"}`] = 1e6
		return m
	}
	for _, tc := range []struct {
		name   string
		m0, m1 map[string]float64
		want   float64
	}{
		{"from zero", series(0, 0, 0, 0, 0), series(10, 60, 90, 100, 100), 25e-6 + 25e-6*40/50},
		// Only what moved during the cell counts: 50 new commits, 40 of
		// them under 25 µs.
		{"deltas", series(100, 100, 100, 100, 100), series(140, 150, 150, 150, 150), 25e-6 * 25 / 40},
		{"in the +Inf bucket", series(0, 0, 0, 0, 0), series(0, 0, 0, 10, 100), 100e-6},
	} {
		got := histogramQuantile(0.5, bucketDeltas(h, tc.m0, tc.m1))
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: p50 = %g, want %g", tc.name, got, tc.want)
		}
	}
	if got := histogramQuantile(0.5, bucketDeltas(h, series(5, 5, 5, 5, 5), series(5, 5, 5, 5, 5))); !math.IsNaN(got) {
		t.Errorf("no commits during the cell: p50 = %g, want NaN", got)
	}
	if d := ledgerMetrics(series(0, 0, 0, 0, 0), series(10, 60, 90, 100, 100)); d == nil || math.Abs(d.commitP50-45e-6) > 1e-12 {
		t.Errorf("ledgerMetrics = %+v, want commitP50 45e-6", d)
	}
}

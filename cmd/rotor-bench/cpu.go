package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// cpuSnapshot is the machine's busy CPU time and that of the benchmark's
// own processes, in clock ticks, so that CPU used by anything else on the
// machine during a run (other builds and tests) can be reported.
type cpuSnapshot struct {
	machineBusy, machineTotal int64
	ours                      int64
}

// takeCPU reads /proc; ok is false where /proc is unavailable.
func takeCPU(pids []int) (cpuSnapshot, bool) {
	var s cpuSnapshot
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s, false
	}
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, _ := strconv.ParseInt(v, 10, 64)
		s.machineTotal += n
		if i != 3 && i != 4 {
			s.machineBusy += n
		}
	}
	for _, pid := range append([]int{os.Getpid()}, pids...) {
		n, ok := procCPU(pid)
		if !ok {
			return s, false
		}
		s.ours += n
	}
	return s, true
}

// procCPU is a process's utime+stime from /proc/PID/stat.
func procCPU(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// After the command: state is field 3, utime 14 and stime 15.
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + st, true
}

// foreignCPU describes the CPU others used between two snapshots.
func foreignCPU(a, b cpuSnapshot) string {
	total := float64(b.machineTotal-a.machineTotal) / clockTicks
	busy := float64(b.machineBusy-a.machineBusy) / clockTicks
	ours := float64(b.ours-a.ours) / clockTicks
	other := max(0, busy-ours)
	if total <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("benchmark processes %.1f CPU-s, other processes %.1f CPU-s (%.1f%% of the machine's %.0f CPU-s)", ours, other, 100*other/total, total)
}

// perRequest is each server process's CPU time and request count at one
// moment, for CPU per request: on shared cores, the currency.
type perRequest struct {
	ticks    map[string]int64
	writes   map[string]int64 // write system calls, /proc/PID/io syscw
	requests map[string]int64
}

func takePerRequest(r *rig, targets map[string]*target) perRequest {
	p := perRequest{ticks: map[string]int64{}, writes: map[string]int64{}, requests: map[string]int64{}}
	var all int64
	for m, t := range targets {
		all += t.ok.Load()
		p.requests[m] = t.ok.Load()
	}
	p.requests["provider"] = all
	for name, c := range map[string]*child{"provider": r.provider, modeBare: r.bare, modeRotor: r.bridge} {
		if c == nil {
			continue
		}
		if n, ok := procCPU(c.pid()); ok {
			p.ticks[name] = n
		}
		if n, ok := procWrites(c.pid()); ok {
			p.writes[name] = n
		}
	}
	return p
}

// perRequestLine is each process's CPU time per request between a and b,
// or with writes its write system calls per request.
func perRequestLine(a, b perRequest, writes bool) string {
	var parts []string
	for _, name := range []string{modeBare, modeRotor, "provider"} {
		m0, m1 := a.ticks, b.ticks
		if writes {
			m0, m1 = a.writes, b.writes
		}
		t0, ok0 := m0[name]
		t1, ok1 := m1[name]
		n := b.requests[name] - a.requests[name]
		if !ok0 || !ok1 || n <= 0 {
			continue
		}
		title := map[string]string{modeBare: "bare proxy", modeRotor: "rotor bridge", "provider": "fake provider"}[name]
		if writes {
			parts = append(parts, fmt.Sprintf("%s %.1f", title, float64(t1-t0)/float64(n)))
		} else {
			parts = append(parts, fmt.Sprintf("%s %.0f µs", title, float64(t1-t0)/clockTicks*1e6/float64(n)))
		}
	}
	return strings.Join(parts, ", ")
}

// procWrites is a process's write system calls so far, syscw in
// /proc/PID/io.
func procWrites(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

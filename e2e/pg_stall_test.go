//go:build unix

package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A bridge that stops mid-batch (a laptop suspended, a process paused,
// SIGSTOP) while holding the schema's admission lock held every other
// bridge on the team ledger until the session's idle timeout (20 s; the
// healthy bridge answered 503 ledger_unavailable after 19.6 s). The batch
// transaction's own idle bound (2 s) ends it; the bound here, 10 s, is
// far from both so that a loaded machine does not decide the result.
func TestStoppedBridgeStallsTheTeam(t *testing.T) {
	tm := newPGTeam(t, 2, "")
	tm.run(0, "budget", "add", "--requests", "100000000", "--window", "day", "--name", "all")
	a, b := tm.start(0), tm.start(1)
	l := startLoad(8, []string{a.url}, []string{tm.homes[0].token()})
	defer l.stop()
	lb := startLoad(2, []string{b.url}, []string{tm.homes[1].token()})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, tm.base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	caught := false
	for try := 0; try < 300 && !caught; try++ {
		time.Sleep(20 * time.Millisecond)
		a.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(50 * time.Millisecond)
		var n int
		if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND s.application_name = $1`, "rotor_e2e_"+tm.schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			time.Sleep(300 * time.Millisecond) // B's own batches end by now
			if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND s.application_name = $1 AND s.state = 'idle in transaction'`, "rotor_e2e_"+tm.schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				caught = true
				break
			}
		}
		a.cmd.Process.Signal(syscall.SIGCONT)
	}
	if !caught {
		t.Skip("never stopped bridge A while it held the admission lock")
	}
	defer a.cmd.Process.Signal(syscall.SIGCONT)
	lb.stop()
	start := time.Now()
	answers := map[string]int{}
	var firstOK time.Duration
	for time.Since(start) < 30*time.Second {
		c, cancel := context.WithTimeout(ctx, 60*time.Second)
		t0 := time.Now()
		r, err := decide(c, b.url, tm.homes[1].token())
		cancel()
		k := "error"
		if err == nil {
			k = fmt.Sprintf("%d %s", r.status, errorCode(r.body))
		}
		answers[k]++
		t.Logf("%5.1fs: bridge B answered %s in %v", time.Since(start).Seconds(), k, time.Since(t0).Round(time.Millisecond))
		if k == "200 " {
			firstOK = time.Since(start)
			break
		}
	}
	t.Logf("answers %v", answers)
	if firstOK == 0 || firstOK > 10*time.Second {
		t.Errorf("bridge B, healthy, served its first 200 %v after bridge A stopped while holding the admission lock (answers %v)", firstOK, answers)
	}
}

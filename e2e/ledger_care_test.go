package e2e

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/failpoint"
	"github.com/rotorhq/rotor/ledger"
)

// Issue 18 item 5: rotor ledger backup, while a bridge serves a steady load,
// writes a file that opens as a valid ledger holding every request the
// bridge acknowledged (200) before the backup started.
func TestLedgerBackupUnderLoad(t *testing.T) {
	e := newE2E(t)
	_, keys := e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()

	var mu sync.Mutex
	var acked []string
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failed []string
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := newCall(ctx, "POST", b.url+"/v1/decisions", tok, decideBody)
				if err != nil {
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // cancelled at the end
				}
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode == 200 {
					acked = append(acked, resp.Header.Get("X-Request-ID"))
				} else {
					failed = append(failed, resp.Status)
				}
				mu.Unlock()
			}
		}()
	}
	// Wait for load to be under way (an event: acknowledged requests).
	for deadline := time.Now().Add(60 * time.Second); ; {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests acknowledged in 60s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "backup.db")
	r := e.mustRun("ledger", "backup", file)
	mu.Lock()
	during := len(acked) - len(before)
	mu.Unlock()
	// Keep the load on until a few more were acknowledged after the copy,
	// then stop.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= len(before)+during+10 {
			break
		}
	}
	cancel()
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("requests failed during the backup: %v", failed)
	}
	if !strings.Contains(r.stdout, file) {
		t.Errorf("backup printed %q, want the file", r.stdout)
	}

	// The copy is a ledger of its own: the CLI reads it, and it holds
	// every row acknowledged before the backup began, settled.
	rep := parseJSON(t, e.mustRun("--db", file, "ledger", "report", "--format", "json").stdout)
	if len(rep) != 1 || rep[0]["requests"].(float64) < float64(len(before)) {
		t.Errorf("report of the backup: %v, want at least %d requests", rep, len(before))
	}
	s, err := ledger.Open(context.Background(), file, ledger.Options{})
	if err != nil {
		t.Fatalf("backup does not open as a ledger: %v", err)
	}
	defer s.Close()
	for _, id := range before {
		row, ok, err := s.RowByID(context.Background(), id)
		if err != nil || !ok || !row.Settled || row.Status != 200 {
			t.Errorf("acknowledged request %s in the backup: %+v %v %v", id, row, ok, err)
		}
	}
	// No provider key and no bridge token is in the copy (only hashes).
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	keys["bridge token"] = tok
	if leaks := secretLeaks(raw, keys); len(leaks) > 0 {
		t.Errorf("the backup holds secrets: %v", leaks)
	}
	rowsOut := e.mustRun("--db", file, "ledger", "rows", "--format", "csv").stdout
	if leaks := secretLeaks([]byte(rowsOut), keys); len(leaks) > 0 {
		t.Errorf("ledger rows prints secrets: %v", leaks)
	}
	// A second backup to the same file is refused, naming it.
	if r := e.run("ledger", "backup", file); r.code != ExitUsage || !strings.Contains(r.stderr, file) {
		t.Errorf("backup to an existing file: exit %d %q, want 2 naming it", r.code, r.stderr)
	}
}

// A backup killed before it finished (kill -9, the machine) leaves no
// file under the name asked for: a copy cut short there would open as a
// valid, empty ledger, pass integrity_check, and refuse the next backup to
// that name. The copy is whole and synced before it gets the name.
func TestLedgerBackupKilledLeavesNoFile(t *testing.T) {
	e := newE2E(t, failpointTag)
	e.mustRun("init")
	e.mustRun("budget", "add", "--requests", "10", "--window", "day", "--name", "kept")
	file := filepath.Join(t.TempDir(), "backup.db")
	r := e.exec(append(slices.Clone(e.env), failpoint.Env+"="+failpoint.DuringBackup), e.bin, "ledger", "backup", file)
	if r.code == 0 {
		t.Fatal("the armed backup was not killed")
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatalf("a backup killed before it finished left %s", file)
	}
	e.mustRun("ledger", "backup", file)
	if out := e.mustRun("--db", file, "budget", "list", "--format", "csv").stdout; !strings.Contains(out, "kept") {
		t.Errorf("the backup after the killed one lacks the budget:\n%s", out)
	}
}

// Issue 18 items 5 and 6 on the built binary: ledger rows round-trips
// through csv and jsonl, prune keeps day reports, --jq filters two
// commands, completion lists budget names.
func TestLedgerRowsPruneJQCompletion(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for d := 10; d >= 6; d-- {
		seedUsage(t, e.db(), today.AddDate(0, 0, -d).Add(7*time.Hour+13*time.Minute), 3+d)
	}
	seedUsage(t, e.db(), time.Now().UTC().Add(-time.Hour), 2) // folds the days above
	from, to := today.AddDate(0, 0, -11), today.AddDate(0, 0, -5)
	day := func(t time.Time) string { return t.Format("2006-01-02") }

	s, err := ledger.Open(context.Background(), e.db(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Rows(context.Background(), from, to, 0)
	s.Close()
	if err != nil || len(want) != 13+12+11+10+9 {
		t.Fatalf("seeded rows: %d, %v", len(want), err)
	}
	rowsArgs := []string{"ledger", "rows", "--from", day(from), "--to", day(to), "--format"}
	csvOut := e.mustRun(append(rowsArgs, "csv")...).stdout
	recs, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if err != nil || len(recs) != len(want)+1 {
		t.Fatalf("rows csv: %v, %d records", err, len(recs))
	}
	jsonlOut := e.mustRun(append(rowsArgs, "jsonl")...).stdout
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(jsonlOut))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != len(want) {
		t.Fatalf("jsonl: %d lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		c := map[string]string{}
		for j, h := range recs[0] {
			c[h] = recs[i+1][j]
		}
		wantCSV := map[string]string{"request_id": w.RequestID, "time": w.Time.Format("2006-01-02T15:04:05.000Z07:00"), "credential": w.Credential,
			"total_tokens": fmt.Sprint(w.TotalTokens.V), "input_tokens": fmt.Sprint(w.InputTokens.V), "status": fmt.Sprint(w.Status), "cost_usd": "", "client": w.Client}
		for k, v := range wantCSV {
			if c[k] != v {
				t.Errorf("csv row %d %s = %q, want %q", i, k, c[k], v)
			}
		}
		l := lines[i]
		if l["request_id"] != w.RequestID || l["total_tokens"] != float64(w.TotalTokens.V) || l["cost_usd"] != nil || l["model"] != w.Model {
			t.Errorf("jsonl row %d = %v, want %+v with cost null", i, l, w)
		}
	}

	// --jq on two commands; completion of budget names.
	e.mustRun("budget", "add", "--requests", "1000", "--window", "day", "--name", "daily")
	e.mustRun("budget", "add", "--tokens", "100000", "--window", "7d", "--name", "weekly")
	if got := e.mustRun("budget", "list", "--jq", ".[].name").stdout; got != "daily\nweekly\n" {
		t.Errorf("budget list --jq .[].name = %q", got)
	}
	report := []string{"ledger", "report", "--by", "day", "--from", day(from), "--to", day(to)}
	if got := e.mustRun(append(report, "--jq", `.[] | "\(.day) \(.requests)"`)...).stdout; got != fmt.Sprintf("%s 13\n%s 12\n%s 11\n%s 10\n%s 9\n",
		day(today.AddDate(0, 0, -10)), day(today.AddDate(0, 0, -9)), day(today.AddDate(0, 0, -8)), day(today.AddDate(0, 0, -7)), day(today.AddDate(0, 0, -6))) {
		t.Errorf("ledger report --jq = %q", got)
	}
	if r := e.run("budget", "list", "--jq", ".[] |"); r.code != ExitUsage || !strings.Contains(r.stderr, "--jq") {
		t.Errorf("bad --jq: exit %d %q", r.code, r.stderr)
	}
	comp := e.mustRun("__complete", "budget", "remove", "").stdout
	if !strings.HasPrefix(comp, "daily\nweekly\n:") {
		t.Errorf("completion of budget remove = %q, want daily and weekly", comp)
	}

	// prune: refused inside weekly's window, naming it; after its removal,
	// the day reports are the same.
	dayReport := e.mustRun(append(report, "--format", "json")...).stdout
	cut := day(today.AddDate(0, 0, -6)) // inside weekly, a rolling 7d window
	if r := e.run("ledger", "prune", "--before", cut); r.code != ExitUsage || !strings.Contains(r.stderr, "weekly") {
		t.Errorf("prune inside weekly's window: exit %d %q", r.code, r.stderr)
	}
	e.mustRun("budget", "remove", "weekly")
	out := e.mustRun("ledger", "prune", "--before", cut).stdout
	if !strings.Contains(out, fmt.Sprintf("pruned %d usage rows", 13+12+11+10)) || !strings.Contains(out, "kept the rollups") {
		t.Errorf("prune said %q", out)
	}
	if got := e.mustRun(append(report, "--format", "json")...).stdout; !reflect.DeepEqual(parseJSON(t, got), parseJSON(t, dayReport)) {
		t.Errorf("day report after prune:\n%s\nbefore:\n%s", got, dayReport)
	}
	if n := len(parseJSON(t, e.mustRun(append(rowsArgs, "json")...).stdout)); n != 9 {
		t.Errorf("rows left after prune: %d, want the 9 after the cut", n)
	}
}

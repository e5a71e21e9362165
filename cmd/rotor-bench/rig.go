package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Budgets the rotor mode runs under: active (admission reads both on every
// request) but far too high to ever refuse.
var benchBudgets = [][]string{
	{"--requests", "1000000000", "--window", "30d"},
	{"--tokens", "1000000000000000", "--window", "month"},
}

// credentialNames are rotor's three credentials, all on the fake provider.
var credentialNames = []string{"bench-a", "bench-b", "bench-c"}

// rig is the set of processes under test.
type rig struct {
	o        *options
	keys     []string // provider keys, one per credential
	provider *child
	bare     *child
	bridge   *child
	home     string
	token    string // the bridge's default client token
	// dbURL is rotor's ROTOR_DB when the ledger is PostgreSQL; dropDB
	// removes the schema -db postgres made.
	dbURL  string
	dropDB func()
}

// startRig starts the fake provider and, as asked, the bare proxy and the
// rotor bridge.
func startRig(ctx context.Context, o *options, withBare, withRotor bool) (_ *rig, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r := &rig{o: o, home: filepath.Join(o.work, "home")}
	defer func() {
		if err != nil {
			_ = r.release()
		}
	}()
	for _, n := range credentialNames {
		r.keys = append(r.keys, "sk-bench-"+n+"-"+rand.Text())
	}
	cmd := exec.Command(self, "-serve-provider")
	cmd.Env = childEnv(envProviderKeys+"="+strings.Join(r.keys, ","), fmt.Sprintf("%s=%d", envStreamEvents, o.streamEvents))
	if r.provider, err = startChild(ctx, "fake provider", cmd, filepath.Join(o.work, "provider.log")); err != nil {
		return nil, err
	}
	r.provider.termIsStop = true
	if withBare {
		cmd := exec.Command(self, "-serve-bare-proxy", r.provider.url)
		cmd.Env = childEnv(envBareKey + "=" + r.keys[0])
		if r.bare, err = startChild(ctx, "bare proxy", cmd, filepath.Join(o.work, "bare.log")); err != nil {
			return nil, err
		}
		r.bare.termIsStop = true
	}
	if withRotor {
		if err := r.startBridge(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// keyEnv names the environment variable holding credential i's key.
func keyEnv(i int) string { return fmt.Sprintf("BENCH_PROVIDER_KEY_%c", 'A'+i) }

// rotorYAML is the bridge's configuration: three credentials on the fake
// provider (Decisions on benchModel, the chat models on the OpenAI routes),
// model cooldown on, the chosen log level.
func (r *rig) rotorYAML() string {
	var b strings.Builder
	b.WriteString("# written by rotor-bench\n")
	fmt.Fprintf(&b, "log: {level: %s", r.o.logLevel)
	if r.o.logFormat != "" {
		fmt.Fprintf(&b, ", format: %s", r.o.logFormat)
	}
	b.WriteString("}\nmodel_cooldown: {enabled: true}\n")
	if r.o.ledgerSync != "" {
		fmt.Fprintf(&b, "ledger: {synchronous: %s}\n", r.o.ledgerSync)
	}
	b.WriteString("pools:\n  api:\n    credentials:\n")
	for i, n := range credentialNames {
		fmt.Fprintf(&b, `      - name: %s
        region: us
        base_url: %s
        api_key_env: %s
        visibility: {allow: ["decide-*", "chat-*"]}
        model_profiles:
          %s: {supported_endpoints: ["/v1/decisions"]}
`, n, r.provider.url, keyEnv(i), benchModel)
	}
	return b.String()
}

func (r *rig) rotorEnv(extra ...string) []string {
	env := []string{"ROTOR_HOME=" + r.home}
	if r.dbURL != "" {
		env = append(env, "ROTOR_DB="+r.dbURL)
	}
	for i, k := range r.keys {
		env = append(env, keyEnv(i)+"="+k)
	}
	return childEnv(append(env, extra...)...)
}

// rotorCmd runs a short rotor command in the bench home and returns its
// stdout.
func (r *rig) rotorCmd(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.o.rotorBin, args...)
	cmd.Env = r.rotorEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("rotor %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func (r *rig) startBridge(ctx context.Context) (err error) {
	if err := os.MkdirAll(r.home, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.home, "rotor.yaml"), []byte(r.rotorYAML()), 0o600); err != nil {
		return err
	}
	if r.dbURL, r.dropDB, err = benchDB(ctx, r.o.db); err != nil {
		return err
	}
	if r.dbURL != "" {
		// A shared ledger is migrated by the operator, never by a bridge.
		if _, err := r.rotorCmd(ctx, "ledger", "migrate"); err != nil {
			return err
		}
	}
	if _, err := r.rotorCmd(ctx, "config", "check"); err != nil {
		return err
	}
	for _, args := range benchBudgets {
		if _, err := r.rotorCmd(ctx, append([]string{"budget", "add", "--replace"}, args...)...); err != nil {
			return err
		}
	}
	var extra []string
	if r.o.cpuProfile != "" {
		extra = append(extra, "ROTOR_CPUPROFILE="+r.o.cpuProfile)
	}
	if r.o.memProfile != "" {
		extra = append(extra, "ROTOR_MEMPROFILE="+r.o.memProfile)
	}
	cmd := exec.Command(r.o.rotorBin, "bridge", "start", "--listen", "127.0.0.1:0")
	cmd.Env = r.rotorEnv(extra...)
	if r.bridge, err = startChild(ctx, "rotor bridge", cmd, filepath.Join(r.o.work, "bridge.log")); err != nil {
		return err
	}
	tok, err := os.ReadFile(filepath.Join(r.home, "bridge.token"))
	if err != nil {
		return fmt.Errorf("read the bridge token: %w", err)
	}
	r.token = strings.TrimSpace(string(tok))
	return nil
}

// pids lists the running child processes.
func (r *rig) pids() []int {
	var out []int
	for _, c := range []*child{r.provider, r.bare, r.bridge} {
		if c != nil {
			out = append(out, c.pid())
		}
	}
	return out
}

// close stops the bridge first (so that its CPU profile and ledger are
// complete), then the proxy and the provider.
func (r *rig) close() error {
	var errs []error
	for _, c := range []*child{r.bridge, r.bare, r.provider} {
		if c != nil {
			errs = append(errs, c.stop())
		}
	}
	r.bridge, r.bare, r.provider = nil, nil, nil
	return errors.Join(errs...)
}

// release closes the rig and drops the PostgreSQL schema -db postgres
// made, once its ledger has been read back.
func (r *rig) release() error {
	err := r.close()
	if r.dropDB != nil {
		r.dropDB()
		r.dropDB = nil
	}
	return err
}

// ledgerSummary reads the stopped bridge's ledger back through
// `rotor ledger report`: rows by status and by credential.
type ledgerSummary struct {
	byStatus     map[string]int64
	byCredential map[string]int64
}

func (s ledgerSummary) total() int64 {
	var n int64
	for _, v := range s.byStatus {
		n += v
	}
	return n
}

func (s ledgerSummary) String() string {
	return "by status " + fmtCounts(s.byStatus) + ", by credential " + fmtCounts(s.byCredential)
}

func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// stopAndCheckLedger stops the processes (SIGTERM: the bridge flushes its
// ledger and writes its profiles), reads the ledger, and returns the line
// that compares its rows with the ok answers rotor sent, flagged when a 200
// has no row.
func (r *rig) stopAndCheckLedger(ctx context.Context, rotorOK int64) (string, error) {
	if err := r.close(); err != nil {
		return "", err
	}
	sum, err := r.readLedger(ctx)
	if err != nil {
		return "", err
	}
	line := fmt.Sprintf("ledger: %d rows for %d answers rotor sent with status 200 (%s)", sum.total(), rotorOK, sum)
	if sum.total() != rotorOK || sum.byStatus["200"] != rotorOK {
		line += "  MISMATCH: every 200 must have its row"
	}
	return line, nil
}

func (r *rig) readLedger(ctx context.Context) (ledgerSummary, error) {
	s := ledgerSummary{byStatus: map[string]int64{}, byCredential: map[string]int64{}}
	for _, by := range []string{"status", "credential"} {
		out, err := r.rotorCmd(ctx, "ledger", "report", "--since", "24h", "--by", by, "--format", "json")
		if err != nil {
			return s, err
		}
		var rows []map[string]any
		if err := json.Unmarshal(out, &rows); err != nil {
			return s, fmt.Errorf("ledger report: %w", err)
		}
		for _, row := range rows {
			n, _ := row["requests"].(float64)
			k := fmt.Sprint(row[by])
			if by == "status" {
				s.byStatus[k] += int64(n)
			} else {
				s.byCredential[k] += int64(n)
			}
		}
	}
	return s, nil
}

//go:build unix

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeRotor writes a stand-in for `rotor bridge start` that records its pid,
// prints a URL and stays up, as a bridge would.
func stubRotor(t *testing.T) (bin, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "child.pid")
	bin = filepath.Join(dir, "rotor")
	script := "#!/usr/bin/env bash\necho $$ > '" + pidFile + "'\necho http://127.0.0.1:9\nexec sleep 300\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, pidFile
}

func bridgeUpStub(t *testing.T, env ...string) (string, error) {
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "bridge-up.sh"), "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// README: bridge-up.sh writes bridge.pid, bridge.url, bridge.log to
// $ROTOR_RUN_DIR. It must not change the mode of a directory the user
// points it at (a shared run directory, /tmp, $HOME).
func TestBridgeUpLeavesRunDirModeAlone(t *testing.T) {
	bin, pidFile := stubRotor(t)
	run := t.TempDir()
	if err := os.Chmod(run, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	out, _ := bridgeUpStub(t, "ROTOR="+bin, "ROTOR_RUN_DIR="+run, "ROTOR_WAIT=1")
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	fi, err := os.Stat(run)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModePerm | os.ModeSticky); got != 0o777|os.ModeSticky {
		t.Errorf("ROTOR_RUN_DIR mode after bridge-up.sh = %v, want it left at drwxrwxrwt\n%s", got, out)
	}
}

// A ROTOR_WAIT that is not whole seconds must not leave a bridge running
// that no bridge.pid names (nor temporary files behind).
func TestBridgeUpBadWaitLeavesNoOrphan(t *testing.T) {
	bin, pidFile := stubRotor(t)
	run := t.TempDir()
	out, err := bridgeUpStub(t, "ROTOR="+bin, "ROTOR_RUN_DIR="+run, "ROTOR_WAIT=10s")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out, "ROTOR_WAIT") {
		t.Errorf("bridge-up.sh with ROTOR_WAIT=10s: %v, want exit 2 naming ROTOR_WAIT\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond)
	if b, rerr := os.ReadFile(pidFile); rerr == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("bridge-up.sh (err %v) left the bridge it started (pid %d) running; output:\n%s", err, pid, out)
		}
	}
	left, _ := filepath.Glob(filepath.Join(run, "bridge.*.*"))
	if len(left) > 0 {
		t.Errorf("temporary files left in the run dir: %v", left)
	}
}

// README: decide.sh sends any text, escaped into the JSON. rotor takes a
// body up to 64 MiB, but an input of ~100 KB with quotes or newlines
// escapes to a body over Linux's 128 KiB per-argument limit, and decide.sh
// passes the body to curl as one argument: exit 126, "Argument list too long".
func TestDecideSendsLargeInput(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"dec_1"}`)
	}))
	defer srv.Close()
	input := strings.Repeat("line \"q\"\n", 11000) // 99 KB, escapes to ~143 KB
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "decide.sh"), "api/decide-mini", input)
	cmd.Env = append(os.Environ(), "ROTOR_URL="+srv.URL, "ROTOR_TOKEN=t0ken")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("decide.sh with a %d-byte input: %v\n%s", len(input), err, out)
	}
	var body struct{ Input string }
	if err := json.Unmarshal(got, &body); err != nil || body.Input != input {
		t.Fatalf("body sent: %v (input preserved: %v)", err, body.Input == input)
	}
}

// quickstart.sh without a rotor binary said "rotor: command not found"
// at its first step (exit 127); it now exits 2 saying how to get one.
func TestQuickstartWithoutRotorSaysHowToGetIt(t *testing.T) {
	cmd := exec.Command("bash", filepath.Join("..", "scripts", "quickstart.sh"))
	cmd.Env = append(os.Environ(), "ROTOR="+filepath.Join(t.TempDir(), "no-rotor"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "go install ./cmd/rotor") {
		t.Errorf("quickstart.sh without rotor: %v\n%s; want exit 2 saying how to get it", err, out)
	}
}

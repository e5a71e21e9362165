package main

import (
	"bufio"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// readUnit reads a systemd unit file into section -> key -> values.
func readUnit(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[' && l[len(l)-1] == ']':
			section = l[1 : len(l)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value in a section: %q", path, n, l)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// The systemd user unit starts `rotor bridge start`, reloads with SIGHUP,
// restarts on failure (not on exit 2, which a restart cannot fix), and is
// a user unit (WantedBy default.target, no User=).
func TestSystemdUnitStartsBridgeAndReloadsWithHUP(t *testing.T) {
	u := readUnit(t, "../../contrib/systemd/rotor-bridge.service")
	svc := u["Service"]
	one := func(k string) string {
		t.Helper()
		if len(svc[k]) != 1 {
			t.Errorf("[Service] %s: %q, want one", k, svc[k])
			return ""
		}
		return svc[k][0]
	}
	start := strings.Fields(one("ExecStart"))
	if len(start) != 3 || !strings.HasSuffix(start[0], "/rotor") || start[1] != "bridge" || start[2] != "start" {
		t.Errorf("ExecStart = %q, want <path>/rotor bridge start", start)
	}
	if !strings.HasPrefix(start[0], "/") && !strings.HasPrefix(start[0], "%h/") {
		t.Errorf("ExecStart %q: systemd wants an absolute path", start[0])
	}
	if got := one("ExecReload"); got != "/bin/kill -HUP $MAINPID" {
		t.Errorf("ExecReload = %q, want SIGHUP to the main process", got)
	}
	if got := one("Restart"); got != "on-failure" {
		t.Errorf("Restart = %q", got)
	}
	if got := one("RestartPreventExitStatus"); got != "2" {
		t.Errorf("RestartPreventExitStatus = %q, want 2 (fix the config first)", got)
	}
	if svc["User"] != nil || u["Install"]["WantedBy"] == nil || u["Install"]["WantedBy"][0] != "default.target" {
		t.Errorf("not a user unit: User=%q WantedBy=%q", svc["User"], u["Install"]["WantedBy"])
	}
	if svc["Environment"] != nil {
		t.Errorf("[Service] Environment= in the unit; keys belong in the env file")
	}
}

// The launchd agent is well-formed XML, labelled dev.rotor.bridge, and its
// program runs `rotor bridge start` through a shell that parses.
func TestLaunchdPlistIsWellFormedAndStartsBridge(t *testing.T) {
	b, err := os.ReadFile("../../contrib/launchd/dev.rotor.bridge.plist")
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(b)))
	d.Strict = true
	var texts []string
	var path []string
	args := []string{}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("plist is not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			path = append(path, tk.Name.Local)
		case xml.EndElement:
			path = path[:len(path)-1]
		case xml.CharData:
			s := strings.TrimSpace(string(tk))
			if s == "" {
				continue
			}
			texts = append(texts, s)
			if len(path) >= 2 && path[len(path)-2] == "array" {
				args = append(args, s)
			}
		}
	}
	if i := slices.Index(texts, "Label"); i < 0 || i+1 >= len(texts) || texts[i+1] != "dev.rotor.bridge" {
		t.Errorf("Label is not dev.rotor.bridge: %q", texts)
	}
	if len(args) != 3 || args[0] != "/bin/sh" || args[1] != "-c" || !strings.Contains(args[2], `rotor" bridge start`) {
		t.Fatalf("ProgramArguments = %q, want /bin/sh -c '... rotor bridge start'", args)
	}
	if out, err := exec.Command("sh", "-n", "-c", args[2]).CombinedOutput(); err != nil {
		t.Errorf("the agent's shell command does not parse: %v\n%s", err, out)
	}
}

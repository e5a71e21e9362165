package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/httpx"
)

// TestREADMEIsComplete keeps the README true: every command, error code,
// config key and ROTOR_* variable a user can meet is listed there.
func TestREADMEIsComplete(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if !strings.Contains(readme, "go run ./cmd/rotor demo") || !strings.Contains(readme, "scripts/test.sh") {
		t.Error("README does not open with the demo and test commands")
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if c.Runnable() && c.HasParent() {
			path := c.CommandPath()
			if !strings.Contains(readme, "`"+path) {
				t.Errorf("README does not document %q", path)
			}
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" {
					return
				}
				if !strings.Contains(readme, "--"+f.Name) {
					t.Errorf("README does not mention %s --%s", path, f.Name)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	f, _, _ := testFactory(t)
	walk(NewCmdRoot(f))
	for code, info := range httpx.Codes {
		if !strings.Contains(readme, "`"+code+"`") {
			t.Errorf("README error table lacks %s (%d)", code, info.Status)
		}
	}
	for _, k := range config.Keys {
		if !strings.Contains(readme, config.EnvName(k)) {
			t.Errorf("README does not list %s", config.EnvName(k))
		}
		leaf := k[strings.LastIndex(k, ".")+1:]
		if !strings.Contains(readme, leaf+":") {
			t.Errorf("README config sample lacks %s", k)
		}
	}
	for _, v := range []string{config.EnvModelCooldownEnabled, config.EnvModelCooldownMax, config.EnvLearnedMode, config.EnvLearnedPolicy, config.EnvStorageBackend,
		"ROTOR_HOME", "ROTOR_CONFIG", "ROTOR_DB", "ROTOR_RUNTIME_TOKEN", "ROTOR_TOKEN"} {
		if !strings.Contains(readme, v) {
			t.Errorf("README does not list %s", v)
		}
	}
}

// Issue 14, item 22: the README warns that the first run compiles SQLite
// for minutes, and says how to build once.
func TestREADMESaysFirstRunCompilesSQLite(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := bytes.Cut(b, []byte("## Quick start"))
	for _, want := range []string{"go run ./cmd/rotor demo", "5 minutes", "SQLite", "go build -o rotor ./cmd/rotor"} {
		if !bytes.Contains(top, []byte(want)) {
			t.Errorf("README's opening lacks %q", want)
		}
	}
}

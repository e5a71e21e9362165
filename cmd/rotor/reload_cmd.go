package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/bridge"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/clock"
)

type reloadOptions struct {
	IO         *IOStreams
	Config     func() (*config.Config, error)
	Home       func() (string, error)
	LookupEnv  func(string) (string, bool)
	HTTPClient func() *http.Client
	Clock      clock.Clock
	URL        string
}

func newCmdBridgeReload(f *Factory, runF func(*reloadOptions) error) *cobra.Command {
	opts := &reloadOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: f.HTTPClient, Clock: f.Clock}
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make the running bridge read rotor.yaml again",
		Long: `Validate rotor.yaml (exit 2 naming the key when it does not), then ask the
bridge at --url, else the one recorded in <home>/bridge.json, else at
http://<bridge.listen>, to read it again, through POST /v1/admin/reload with
the home's default token (bridge.token, or ROTOR_TOKEN), and wait until
/v1/status shows the new config generation. It prints the credentials added, removed and changed (as
pool/name) and the settings changed, or "no change".

The bridge refuses a reload that changes a key needing a restart (exit 2,
naming it) and keeps serving its running configuration. Sending SIGHUP to
the bridge does the same reload without this command.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return reloadRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.URL, "url", "", "bridge URL (default: the url in <home>/bridge.json, else http://<bridge.listen>)")
	return cmd
}

func reloadRun(ctx context.Context, opts *reloadOptions) error {
	b, err := findBridge(opts.Config, opts.Home, opts.LookupEnv, opts.URL)
	if err != nil {
		return err
	}
	u := b.url
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := b.request(ctx, http.MethodPost, bridge.AdminReloadPath)
	if err != nil {
		return usageErrorf("bridge URL %s: %v", u, err)
	}
	resp, err := opts.HTTPClient().Do(req)
	if err != nil {
		return b.unreachable(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return b.refused(body)
	}
	if resp.StatusCode != http.StatusOK {
		return reloadRefused(resp.StatusCode, body, u)
	}
	var res reloadResult
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Errorf("bridge reload answer is not what this rotor expects: %v", err)
	}
	if res.Runtime == "in-process" {
		if err := waitGeneration(ctx, opts, b, res.Generation); err != nil {
			return err
		}
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "reloaded: config generation %d\n", res.Generation)
	for _, c := range []struct {
		verb  string
		names []string
	}{{"added", res.Added}, {"removed", res.Removed}, {"changed", res.Changed}} {
		for _, n := range c.names {
			fmt.Fprintf(w, "%s credential %s\n", c.verb, n)
		}
	}
	for _, k := range res.Settings {
		fmt.Fprintf(w, "changed setting %s\n", k)
	}
	if len(res.Added)+len(res.Removed)+len(res.Changed)+len(res.Settings) == 0 {
		fmt.Fprintln(w, "no change")
	}
	if res.Runtime != "in-process" {
		fmt.Fprintf(w, "pools live in the standalone runtime at %s: send it SIGHUP to reload them\n", res.Runtime)
	}
	return nil
}

// reloadRefused turns a refused reload into the command's error: a bad
// or restart-only key, or another token than the home's default, exits 2.
func reloadRefused(status int, body []byte, u string) error {
	var e struct {
		Error struct {
			Message, Code string
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := serverSays([]byte(e.Error.Message))
	if msg == "" {
		msg = serverSays(body)
	}
	switch e.Error.Code {
	case "config_invalid", "restart_required", "admin_only":
		return usageErrorf("bridge at %s refused the reload (%s): %s", u, e.Error.Code, msg)
	}
	return fmt.Errorf("bridge at %s answered %d: %s", u, status, msg)
}

// waitGeneration waits until the bridge's /v1/status shows generation n
// or a later one.
func waitGeneration(ctx context.Context, opts *reloadOptions, b *bridgeTarget, n uint64) error {
	u := b.url
	for {
		req, err := b.request(ctx, http.MethodGet, "/v1/status")
		if err != nil {
			return err
		}
		resp, err := opts.HTTPClient().Do(req)
		if err != nil {
			return fmt.Errorf("bridge at %s: status after reload: %v", u, errors.Unwrap(err))
		}
		var st struct {
			ConfigGeneration uint64 `json:"config_generation"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&st)
		resp.Body.Close()
		if err == nil && st.ConfigGeneration >= n {
			return nil
		}
		if clock.Sleep(ctx, opts.Clock, 50*time.Millisecond) != nil {
			return fmt.Errorf("bridge at %s did not show config generation %d in /v1/status", u, n)
		}
	}
}

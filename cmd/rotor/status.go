package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/decisions"
)

type statusOptions struct {
	IO         *IOStreams
	Config     func() (*config.Config, error)
	Home       func() (string, error)
	LookupEnv  func(string) (string, bool)
	HTTPClient func() *http.Client
	URL        string
	Format     string
}

func newCmdStatus(f *Factory, runF func(*statusOptions) error) *cobra.Command {
	opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: f.HTTPClient}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Ask a running bridge for its pools, cooldowns and budgets",
		Long: `Ask a running bridge (GET /v1/status with the client token) for each pool's
credentials: catalog freshness, legacy rests, credential-wide auth cooldowns
and live model cooldowns; and for every budget's state. No key and no model
name is shown.

The token is ROTOR_TOKEN, or bridge.token in the home folder. The URL is
--url, else the url in <home>/bridge.json (which a running 'rotor bridge
start' writes, so a bridge on a free port is found), else
http://<bridge.listen>.

--format table prints a credentials table and a budgets table; csv prints the
credentials table with a header row; json prints the bridge's status document
as it is: one object (not an array of rows) with version, time, pools (each
with its credentials, cooldowns and catalogs) and budgets. A budget that
fails closed has used and remaining null there (unknown in the table), as
budget list has them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.URL, "url", "", "bridge URL (default: the url in <home>/bridge.json, else http://<bridge.listen>)")
	addFormatFlag(cmd, &opts.Format)
	cmd.Flags().Lookup("format").Usage = "output format: table, json (the bridge's status document, one object) or csv (the credentials table, with a header row)"
	return cmd
}

func statusRun(ctx context.Context, opts *statusOptions) error {
	b, err := findBridge(opts.Config, opts.Home, opts.LookupEnv, opts.URL)
	if err != nil {
		return err
	}
	u := b.url
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := b.request(ctx, http.MethodGet, "/v1/status")
	if err != nil {
		return usageErrorf("--url: %v", err)
	}
	resp, err := opts.HTTPClient().Do(req)
	if err != nil {
		return b.unreachable(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode == http.StatusUnauthorized {
		return b.refused(body)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bridge at %s answered %d: %s", u, resp.StatusCode, serverSays(body))
	}
	if isJSONFormat(opts.Format) {
		return writeJSON(opts.IO.Out, opts.Format, body)
	}
	var st decisions.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("bridge status is not what this rotor expects: %v", err)
	}
	ts := func(t time.Time) string { // when a rest or a budget ends: rounded up
		if t.IsZero() {
			return ""
		}
		return budgets.FormatUntil(t)
	}
	creds := records{Columns: []string{"pool", "credential", "region", "catalog", "resting_until", "auth_cooling_until", "model_cooldowns", "next_release"}}
	for _, p := range st.Pools {
		cat := map[string]decisions.CatalogStatus{}
		for _, c := range p.Catalogs {
			cat[c.Credential] = c
		}
		for _, c := range p.Credentials {
			fresh := "never fetched"
			if cs, ok := cat[c.Name]; ok && !cs.Fetched.IsZero() {
				fresh = "stale"
				if cs.Fresh {
					fresh = "fresh"
				}
			}
			creds.Rows = append(creds.Rows, []cell{textCell(p.Pool), textCell(c.Name), textCell(cat[c.Name].Region), textCell(fresh),
				textCell(ts(c.RestingUntil)), textCell(ts(c.AuthCoolingUntil)), intCell(int64(c.ScopedObservations)), textCell(ts(c.EarliestRelease))})
		}
	}
	if err := creds.write(opts.IO.Out, opts.Format); err != nil || opts.Format == FormatCSV {
		return err
	}
	bud := records{Columns: []string{"budget", "kind", "window", "used", "limit", "state", "frees_at"}}
	for _, b := range st.Budgets {
		// A cost budget's amounts are micro-USD in the document; the
		// table prints them in USD, as budget list's does.
		amount := intCell
		if b.Kind == string(budgets.KindCost) {
			amount = func(v int64) cell { return textCell(budgets.Budget{Kind: budgets.KindCost, Limit: v}.FormatLimit()) } // "$1.5", as budget list prints it
		}
		used := unknownCell // null: usage of unknown cost in its window, as budget list says
		if b.Used != nil && b.State != string(budgets.StateFailClosed) {
			used = amount(*b.Used)
		}
		bud.Rows = append(bud.Rows, []cell{textCell(b.Name), textCell(b.Kind), textCell(b.Window), used, amount(b.Limit), textCell(b.State), textCell(ts(b.FreesAt))})
	}
	return bud.write(opts.IO.Out, opts.Format)
}

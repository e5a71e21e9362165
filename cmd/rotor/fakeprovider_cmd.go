package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
)

type fakeProviderOptions struct {
	IO     *IOStreams
	Logger func() *slog.Logger
	Listen string
	Keys   int
}

// fakeProviderModels are the models each fake key's catalog lists: a
// Decisions model, a chat model and an embeddings model.
var fakeProviderModels = []string{"decide-mini", "gpt-4o-mini", "text-embedding-3-small"}

// maxFakeKeys bounds --keys.
const maxFakeKeys = 100

func newCmdFakeProvider(f *Factory, runF func(*fakeProviderOptions) error) *cobra.Command {
	opts := &fakeProviderOptions{IO: f.IO, Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "fake-provider [--listen ADDR] [--keys N]",
		Short: "Serve a fake LLM provider to try rotor against",
		Long: `Serve the fake provider rotor's demo and tests use, until SIGINT or SIGTERM
(exit 0): the Decisions API and the OpenAI routes (chat completions,
responses, embeddings, streamed or not, with usage), on loopback. It knows N
API keys, each with the catalog ` + strings.Join(fakeProviderModels, ", ") + `;
any other key gets 401. It is for trying rotor out: nothing leaves the machine
and the answers are canned.

It prints, on stdout: its base URL (the first line), the lines to export the
keys (export ROTOR_FAKE_KEY_1=...), and a pools: section to put in place of
the one at the end of rotor.yaml. The keys are the same on every run, so a
bridge keeps working across restarts of the fake provider.`,
		Example: `  rotor fake-provider --keys 3 > fake.txt &
  eval "$(grep '^export ' fake.txt)"
  sed -n '/^pools:/,$p' fake.txt   # the section to paste into rotor.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Keys < 1 || opts.Keys > maxFakeKeys {
				return usageErrorf("--keys must be from 1 to %d, not %d", maxFakeKeys, opts.Keys)
			}
			if _, port, err := net.SplitHostPort(opts.Listen); err != nil || !validPort(port, true) {
				return usageErrorf("--listen must be host:port with a port from 0 to 65535, not %q", opts.Listen)
			}
			if runF != nil {
				return runF(opts)
			}
			return fakeProviderRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:8789", "loopback address to serve on (127.0.0.1:0 picks a free port)")
	intVar(cmd.Flags(), &opts.Keys, "keys", 2, fmt.Sprintf("how many API keys the fake knows (1 to %d)", maxFakeKeys))
	return cmd
}

// fakeKey is the fake provider's i-th key (from 1). Not a secret: the
// fake serves canned answers on loopback, and a fixed key keeps a
// configured bridge working when the fake restarts.
func fakeKey(i int) string { return fmt.Sprintf("rotor-fake-key-%d", i) }

func fakeKeyEnv(i int) string { return fmt.Sprintf("ROTOR_FAKE_KEY_%d", i) }

func fakeProviderRun(ctx context.Context, opts *fakeProviderOptions) error {
	ln, err := httpx.ListenLoopback(opts.Listen, false)
	if err != nil {
		return listenErr(err)
	}
	fp, err := fakeprovider.Start(fakeprovider.Options{Listener: ln, Logger: opts.Logger(), DisableRecording: true})
	if err != nil {
		ln.Close()
		return err
	}
	defer fp.Close()
	for i := 1; i <= opts.Keys; i++ {
		fp.AddKey(fakeKey(i), fakeProviderModels...)
	}
	writeFakeProviderSetup(opts.IO.Out, fp.URL(), opts.Keys)
	fmt.Fprintf(opts.IO.ErrOut, "fake provider serving on %s with %d keys; stop with Ctrl-C\n", fp.URL(), opts.Keys)
	<-ctx.Done()
	return fp.Close()
}

// writeFakeProviderSetup prints the base URL, the export lines and the
// pools: section that uses them.
func writeFakeProviderSetup(w io.Writer, baseURL string, keys int) {
	fmt.Fprintln(w, baseURL)
	fmt.Fprintln(w, "# the fake provider's keys: export them in the shell that starts the bridge")
	for i := 1; i <= keys; i++ {
		fmt.Fprintf(w, "export %s=%s\n", fakeKeyEnv(i), fakeKey(i))
	}
	fmt.Fprintln(w, "# put this in place of the pools: section at the end of rotor.yaml")
	fmt.Fprintln(w, "pools:")
	fmt.Fprintln(w, "  api:")
	fmt.Fprintln(w, "    credentials:")
	for i := 1; i <= keys; i++ {
		fmt.Fprintf(w, "      - name: fake-%d\n", i)
		fmt.Fprintf(w, "        base_url: %s\n", baseURL)
		fmt.Fprintf(w, "        api_key_env: %s\n", fakeKeyEnv(i))
		fmt.Fprintln(w, "        model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}")
	}
}

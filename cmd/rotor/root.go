package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// Main runs rotor with args and returns the exit status. The first SIGINT
// or SIGTERM cancels the command's context (a server stops accepting and
// drains); a second one exits at once, as a second Ctrl-C is meant to.
func Main(args []string, io *IOStreams) int {
	return mainWith(NewFactory(io), args)
}

// mainWith is Main with its factory. The factory closes (the ledger's
// last writes) before the signal handling stops: a signal that comes
// while a ledger closes slowly is still the first (nothing more to
// cancel) or the second (exit now, with its line), never the default
// action that kills the process halfway through the close.
func mainWith(f *Factory, args []string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer onSignals(f.IO, cancel)()
	defer f.Close()
	return run(ctx, f, args)
}

// onSignals calls cancel on the first SIGINT or SIGTERM and exits the
// process on the second (status 128 plus the signal's number, as a shell
// reports a process the signal killed). It returns a func that stops
// listening.
func onSignals(io *IOStreams, cancel func()) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go watchSignals(sigs, done, cancel, time.Now, func(s os.Signal) {
		fmt.Fprintf(io.ErrOut, "rotor: second %v: exiting now, without waiting for requests in flight\n", s)
		n := 2
		if s == syscall.SIGTERM {
			n = 15
		}
		os.Exit(128 + n)
	})
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// repeatWindow: the same signal again this soon after the first is taken
// for the first. timeout(1) sends its SIGTERM to the command and then to
// its process group, so a command run under it may get two at once, and
// would skip its drain; a second Ctrl-C a person presses comes later.
const repeatWindow = 250 * time.Millisecond

// watchSignals calls cancel on the first signal from sigs and exit on the
// next one, unless that is the same signal within repeatWindow; it
// returns once exit returns or done is closed.
func watchSignals(sigs <-chan os.Signal, done <-chan struct{}, cancel func(), now func() time.Time, exit func(os.Signal)) {
	var first os.Signal
	select {
	case first = <-sigs:
		cancel()
	case <-done:
		return
	}
	at := now()
	for {
		select {
		case s := <-sigs:
			if s == first && now().Sub(at) < repeatWindow {
				continue
			}
			exit(s)
			return
		case <-done:
			return
		}
	}
}

func run(ctx context.Context, f *Factory, args []string) int {
	return runRoot(ctx, f, NewCmdRoot(f), args)
}

// runRoot executes root with args, prints the error it ends with (the
// database URL's password masked, whatever produced the message) and
// returns the exit status.
func runRoot(ctx context.Context, f *Factory, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetIn(f.IO.In)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var se *SilentError
		if !errors.As(err, &se) {
			fmt.Fprintf(f.IO.ErrOut, "rotor: %v\n", maskErr(err, f.dbURL()))
			var ue *UsageError
			if errors.As(err, &ue) && ue.showUsage {
				fmt.Fprintln(f.IO.ErrOut, "Run 'rotor --help' or add --help to the command for usage.")
			}
		}
	}
	return exitCode(err)
}

// NewCmdRoot returns the root command with every subcommand.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "rotor <command>",
		Short: "Local bridge and budget ledger for LLM provider credentials",
		Long: `rotor runs an authenticated localhost bridge for an LLM provider's Decisions
API. It picks one of several provider credentials, respects their cooldowns,
fails over where that is safe, and records every request's real token usage
in a SQLite ledger whose budgets are checked before any provider is touched.

Files live in the home folder (--home, ROTOR_HOME, $XDG_CONFIG_HOME/rotor or
~/.config/rotor): rotor.yaml, rotor.db and bridge.token, and bridge.json
while a bridge runs (where rotor status finds it).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       readBuildInfo().String(),
	}
	root.SetVersionTemplate("rotor {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: err, showUsage: true}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&f.home, "home", "", "home folder holding rotor.yaml, rotor.db and bridge.token (env ROTOR_HOME)")
	pf.StringVar(&f.configFlag, "config", "", "configuration file (default <home>/rotor.yaml; env ROTOR_CONFIG)")
	pf.StringVar(&f.dbFlag, "db", "", "ledger database: a SQLite file or a postgres:// URL (default <home>/rotor.db; env ROTOR_DB, config ledger.url)")
	pf.String("log-level", "", "log level: debug, info, warn or error (config log.level)")
	pf.String("log-format", "", "log format: text or json (config log.format)")
	f.bindFlag("log.level", pf.Lookup("log-level"))
	f.bindFlag("log.format", pf.Lookup("log-format"))

	root.AddCommand(
		newCmdInit(f, nil),
		newCmdVersion(f, nil),
		newCmdConfig(f),
		newCmdBudget(f),
		newCmdLedger(f),
		newCmdPricing(f),
		newCmdBridge(f),
		newCmdRuntime(f),
		newCmdStatus(f, nil),
		newCmdDemo(f, nil),
		newCmdFakeProvider(f, nil),
	)
	addLedgerCare(root, f)
	// cobra's completion scripts keep the writer set when checkUsage adds
	// them: the command's, not always the process's stdout.
	root.SetOut(f.IO.Out)
	checkUsage(root)
	addCompletions(root, f)
	return root
}

type versionOptions struct {
	IO   *IOStreams
	Info buildInfo
}

func newCmdVersion(f *Factory, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{IO: f.IO, Info: readBuildInfo()}
	return &cobra.Command{
		Use:   "version",
		Short: "Print rotor's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
}

func versionRun(opts *versionOptions) error {
	fmt.Fprintf(opts.IO.Out, "rotor %s\n", opts.Info)
	return nil
}

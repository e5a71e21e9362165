package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rotorhq/rotor/config"
)

// allowEmpty marks a string flag whose empty value means something (an
// empty --runtime-url is the in-process runtime); every other string flag
// given an empty value is a usage error.
const allowEmpty = "rotor_allow_empty"

// checkUsage makes every usage error of every command under root exit 2
// with a message naming what to change: a wrong argument count (cobra's
// own errors exit 1, and cobra.NoArgs calls an extra argument an "unknown
// command"), a missing required flag, a string flag given an empty value, and an
// unknown subcommand of a command that only groups others (cobra prints
// help and exits 0). It runs before cobra's own checks, as the commands'
// Args function.
func checkUsage(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	root.SetHelpCommand(newCmdHelp())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" {
			return
		}
		if !c.Runnable() {
			// A group: list its subcommands, or name the unknown one,
			// suggesting those within two edits of it as well as those it
			// begins (cobra's default distance applies only to its own
			// check, which a group's RunE replaces).
			c.Args = cobra.ArbitraryArgs
			if c.SuggestionsMinimumDistance <= 0 {
				c.SuggestionsMinimumDistance = 2
			}
			c.RunE = func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return c.Help()
				}
				msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
				if s := c.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return &UsageError{Err: fmt.Errorf("%s", msg), showUsage: true}
			}
		}
		check := c.Args
		c.Args = func(c *cobra.Command, args []string) error {
			if check != nil {
				if err := check(c, args); err != nil {
					return argsError(c, check, args)
				}
			}
			return checkFlags(c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// argsError names the arguments that are missing or too many.
func argsError(c *cobra.Command, check cobra.PositionalArgs, args []string) error {
	what := "missing argument"
	for n := len(args) - 1; n >= 0; n-- {
		if check(c, args[:n]) == nil {
			what = fmt.Sprintf("unexpected argument %s", strings.Join(quoteAll(args[n:]), " "))
			break
		}
	}
	return &UsageError{Err: fmt.Errorf("%s: %s; usage: %s", subcommand(c), what, c.UseLine()), showUsage: true}
}

// subcommand is c's path without the root's name: "budget remove". Errors
// are printed after "rotor: ".
func subcommand(c *cobra.Command) string {
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// rootFlagChecks are the value checks of the root's flags that load no
// configuration to be checked: the log flags and --db.
var rootFlagChecks = map[string]func(string) error{
	"log-level":  config.CheckLogLevel,
	"log-format": config.CheckLogFormat,
	"db": func(v string) error {
		_, err := checkLocation(v)
		return err
	},
}

// checkFlags refuses a required flag that is not given, a string flag
// given as "" or white space, and a bad value of a root flag.

func checkFlags(c *cobra.Command) error {
	var err error
	c.Flags().VisitAll(func(fl *pflag.Flag) {
		if err != nil {
			return
		}
		if req := fl.Annotations[cobra.BashCompOneRequiredFlag]; len(req) > 0 && req[0] == "true" && !fl.Changed {
			err = &UsageError{Err: fmt.Errorf("%s: --%s is required; usage: %s", subcommand(c), fl.Name, c.UseLine()), showUsage: true}
			return
		}
		if fl.Changed && fl.Value.Type() == "string" && strings.TrimSpace(fl.Value.String()) == "" && fl.Annotations[allowEmpty] == nil {
			err = &UsageError{Err: fmt.Errorf("--%s: give a value, not an empty string", fl.Name), showUsage: true}
			return
		}
		// The root's flags are checked here, not only where a command
		// loads its configuration: version, demo and fake-provider load
		// none, and rotor init creates its home before it opens the
		// ledger.
		if check := rootFlagChecks[fl.Name]; check != nil && fl.Changed {
			if e := check(fl.Value.String()); e != nil {
				err = &UsageError{Err: fmt.Errorf("--%s: %w", fl.Name, e), showUsage: true}
			}
		}
	})
	return err
}

// newCmdHelp is 'rotor help [command]': cobra's own prints the root's help
// and exits 0 for a topic it does not know; this one exits 2 naming it.
func newCmdHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help provides help for any command in the application.\nSimply type rotor help [path to command] for full details.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if (sub.IsAvailableCommand() || sub.Name() == "help") && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return &UsageError{Err: fmt.Errorf("unknown help topic %q", strings.Join(args, " ")), showUsage: true}
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

// decimalInt is an integer flag read in base 10 only. pflag's own int
// flags parse with strconv base 0, so "0100" is 64 (octal), "0x10" is 16
// and "1_000" is 1000: a zero-padded or pasted count became another
// limit or another settled usage, silently.
type decimalInt[T int | int64] struct{ p *T }

func (v decimalInt[T]) String() string { return strconv.FormatInt(int64(*v.p), 10) }
func (v decimalInt[T]) Type() string   { return "int" }
func (v decimalInt[T]) Set(s string) error {
	bits := 64
	if _, ok := any(*v.p).(int); ok {
		bits = strconv.IntSize
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return errors.New("out of range")
		}
		return errors.New("want a whole number in decimal digits, such as 2000000")
	}
	*v.p = T(n)
	return nil
}

// intVar and int64Var add a decimalInt flag, as pflag's IntVar and
// Int64Var would add theirs.
func intVar(fs *pflag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var(decimalInt[int]{p}, name, usage)
}

func int64Var(fs *pflag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var(decimalInt[int64]{p}, name, usage)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/ledger"
)

// The commands of a team's shared ledger: migrate and copy.

type migrateOptions struct {
	IO *IOStreams
	// Migrate upgrades the ledger's schema and says where and how.
	Migrate func(context.Context) (migration, error)
}

// migration is what `rotor ledger migrate` did: the database (masked) and
// its schema versions before and after. SQLite migrates itself on open, so
// From is unknown (-1) there.
type migration struct {
	Where    string
	From, To int
}

func newCmdLedgerMigrate(f *Factory, runF func(*migrateOptions) error) *cobra.Command {
	opts := &migrateOptions{IO: f.IO, Migrate: f.migrateLedger}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Upgrade the ledger's schema (a shared PostgreSQL ledger is never upgraded by a bridge)",
		Long: `Upgrade the ledger database's schema to the one this rotor knows, creating
it in an empty PostgreSQL database or schema. On PostgreSQL it runs under an
advisory lock, so two migrates at once are safe; bridges and every other
command never migrate a shared ledger themselves: finding an older schema,
they exit 2 and say to run this. Upgrade rotor everywhere, then migrate once.
A schema newer than this rotor is refused (exit 1).

A SQLite ledger upgrades itself when it is opened; migrate opens it (creating
it if missing) and prints its schema version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return migrateRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func migrateRun(ctx context.Context, opts *migrateOptions) error {
	m, err := opts.Migrate(ctx)
	if err != nil {
		return err
	}
	switch {
	case m.From < 0:
		fmt.Fprintf(opts.IO.Out, "%s: schema version %d (SQLite upgrades itself when opened)\n", m.Where, m.To)
	case m.From == m.To:
		fmt.Fprintf(opts.IO.Out, "%s: schema version %d, already current\n", m.Where, m.To)
	default:
		fmt.Fprintf(opts.IO.Out, "%s: migrated schema version %d to %d\n", m.Where, m.From, m.To)
	}
	return nil
}

// migrateLedger upgrades the ledger at DBPath: PostgreSQL under the
// engine's advisory lock, SQLite by opening it.
func (f *Factory) migrateLedger(ctx context.Context) (migration, error) {
	path, err := f.DBPath()
	if err != nil {
		return migration{}, err
	}
	cfg, err := f.Config()
	if err != nil {
		return migration{}, err
	}
	m := migration{Where: dburl.Mask(path), From: -1}
	if dburl.IsPostgres(path) {
		m.From, m.To, err = migratePostgres(ctx, path, f.pgOptions(cfg, nil))
		if err != nil {
			return migration{}, ledgerOpenErr(path, err)
		}
		return m, nil
	}
	// A SQLite ledger upgrades itself when opened; migrate only opens an
	// existing one: on a mistyped --home or --db it exits 2 naming the
	// path, where creating an empty ledger there would report success.
	l, err := f.Ledger(ctx)
	if err != nil {
		return migration{}, err
	}
	if s, ok := l.(*ledger.Store); ok {
		if m.To, err = s.SchemaVersion(ctx); err != nil {
			return migration{}, err
		}
	}
	return m, nil
}

// initLedger opens the ledger for `rotor init`, which creates what it
// needs: on PostgreSQL it migrates first (an empty schema gets its tables).
func (f *Factory) initLedger(ctx context.Context) (ledger.Ledger, error) {
	path, err := f.DBPath()
	if err != nil {
		return nil, err
	}
	if dburl.IsPostgres(path) {
		f.storeMu.Lock()
		opened := f.store != nil
		f.storeMu.Unlock()
		if !opened {
			if _, err := f.migrateLedger(ctx); err != nil {
				return nil, err
			}
		}
	}
	return f.LedgerOrCreate(ctx)
}

type copyOptions struct {
	IO *IOStreams
	// From opens the ledger to copy (the current one; it must exist).
	From func(context.Context) (ledger.Ledger, error)
	// To opens the target at URL (a PostgreSQL URL or a SQLite file),
	// migrating it first when its schema is empty or older.
	To func(ctx context.Context, url string) (ledger.Ledger, error)
	// Source names the current ledger, to refuse copying it onto itself.
	Source func() (string, error)
	URL    string
	// PageRows is how many rows one read and one import move (default
	// 2000).
	PageRows int
	// DropPruned accepts copying a pruned ledger without its pruned usage
	// when the target holds usage of its own before the cut
	// (--drop-pruned).
	DropPruned bool
}

func newCmdLedgerCopy(f *Factory, runF func(*copyOptions) error) *cobra.Command {
	opts := &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath}
	cmd := &cobra.Command{
		Use:   "copy --to URL",
		Short: "Copy this ledger into another one, such as a team's PostgreSQL ledger",
		Long: `Copy everything the current ledger holds (usage rows, budgets, client
tokens, prices and learned-cooldown state) into the ledger at --to: a
postgres:// URL (its password is never printed) or a SQLite file. An empty
target is created first (on PostgreSQL, its schema is migrated).

Rows already in the target (by request id) are skipped, so a second copy adds
nothing and says so. A budget, client token or price of the same name but
other values in the target stops the copy before anything is written, with
exit 2 and a list of them: remove or rename them on one side, then copy
again. Client tokens keep working: only their hashes are copied.

The usage a prune deleted from the rows (kept in the current ledger's
rollups) is copied too, into the target's rollups, with the prune's cut:
reports and budget windows over pruned time read the same on the target.
It has no request ids, so it goes only into a target holding no usage
before the cut; a second copy, or a target that already reads the same
usage there, adds nothing. A target with other usage before the cut stops
the copy before anything is written, with exit 2, unless --drop-pruned says
to copy without the pruned usage (it then warns once on stderr).`,
		Example: `  rotor ledger copy --to 'postgres://rotor@db.example:5432/rotor?sslmode=verify-full'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.URL == "" {
				return usageErrorf("--to is required: a postgres:// URL or a SQLite file")
			}
			u, err := checkLocation(opts.URL)
			if err != nil {
				return &UsageError{Err: fmt.Errorf("--to: %w", err)}
			}
			opts.URL = u
			if runF != nil {
				return runF(opts)
			}
			return copyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.URL, "to", "", "the target ledger: a postgres:// URL or a SQLite file (required)")
	cmd.Flags().BoolVar(&opts.DropPruned, "drop-pruned", false, "when the target holds usage before the cut, copy without the usage pruned from the rows")
	return cmd
}

// openCopyTarget opens the target of `rotor ledger copy`, migrating a
// PostgreSQL schema that is empty or older. It is closed by the caller.
func (f *Factory) openCopyTarget(ctx context.Context, target string) (ledger.Ledger, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	if !dburl.IsPostgres(target) {
		l, err := ledger.Open(ctx, target, ledger.Options{Clock: f.Clock, Logger: f.Logger(), Synchronous: cfg.Ledger.Synchronous, BusyTimeout: cfg.Ledger.BusyTimeout})
		if err != nil {
			return nil, ledgerOpenErr(target, err)
		}
		return l, nil
	}
	o := f.pgOptions(cfg, nil)
	l, err := openPostgres(ctx, target, o)
	if errors.Is(err, ledger.ErrSchemaTooOld) {
		var from, to int
		if from, to, err = migratePostgres(ctx, target, o); err != nil {
			return nil, ledgerOpenErr(target, err)
		}
		fmt.Fprintf(f.IO.ErrOut, "%s: migrated schema version %d to %d\n", dburl.Mask(target), from, to)
		l, err = openPostgres(ctx, target, o)
	}
	if err != nil {
		return nil, ledgerOpenErr(target, err)
	}
	return l, nil
}

func copyRun(ctx context.Context, opts *copyOptions) error {
	where := dburl.Mask(opts.URL)
	if src, err := opts.Source(); err == nil && src == opts.URL {
		return usageErrorf("--to %s is the current ledger: name another one", where)
	}
	src, err := opts.From(ctx)
	if err != nil {
		return err
	}
	srcImp, ok := src.(ledger.Importer)
	if !ok {
		return fmt.Errorf("the ledger %s cannot be copied from", dburl.Mask(src.Location()))
	}
	pruned, err := srcImp.PrunedUsage(ctx)
	if err != nil {
		return err
	}
	dst, err := opts.To(ctx, opts.URL)
	if err != nil {
		return err
	}
	defer dst.Close()
	dstImp, ok := dst.(ledger.Importer)
	if !ok {
		return fmt.Errorf("the ledger %s cannot be copied into", where)
	}
	plan, err := planCopy(ctx, src, dst)
	if err != nil {
		return maskErr(err, opts.URL)
	}
	if len(plan.conflicts) > 0 {
		return usageErrorf("%s already holds %d item(s) of the same name with other values; nothing was copied:\n  %s",
			where, len(plan.conflicts), strings.Join(plan.conflicts, "\n  "))
	}
	carry, err := planPruned(ctx, src, dst, pruned)
	if err != nil {
		return maskErr(err, opts.URL)
	}
	dropped := !carry.skip && !carry.carry && !pruned.Empty()
	if dropped && !opts.DropPruned {
		return usageErrorf("%s already holds usage before %s, where the current ledger was pruned: the usage of %d requests there is kept only in its rollups, "+
			"and carried with no request ids it could count twice what %s holds; nothing was copied. "+
			"If it holds those requests already (a copy made before the prune), copy with --drop-pruned; else copy into an empty ledger",
			where, pruned.Until.Format(time.RFC3339), pruned.Requests(), where)
	}
	for _, b := range plan.budgets {
		if err := dst.PutBudget(ctx, b, false); err != nil {
			return maskErr(fmt.Errorf("copy budget %s: %w", b.Name, err), opts.URL)
		}
	}
	if len(plan.tokens) > 0 {
		if _, err := dstImp.ImportClientTokens(ctx, plan.tokens); err != nil {
			return maskErr(fmt.Errorf("copy tokens: %w", err), opts.URL)
		}
	}
	pricesAdded := 0
	if len(plan.prices) > 0 {
		// Only where the target still has none: a price set there since
		// the plan (rotor pricing set on the team's ledger) is kept.
		if pricesAdded, err = dstImp.ImportPrices(ctx, plan.prices); err != nil {
			return maskErr(fmt.Errorf("copy prices: %w", err), opts.URL)
		}
		if kept := len(plan.prices) - pricesAdded; kept > 0 {
			fmt.Fprintf(opts.IO.ErrOut, "warning: %d price(s) were stored on %s while copying; its own were kept (rotor pricing list there to check them)\n", kept, where)
		}
	}
	var prunedAdded int64
	if carry.carry {
		// Before the rows: the target must hold no usage before the cut,
		// and the rows left there on the source are copied as rows.
		if prunedAdded, err = dstImp.ImportPruned(ctx, pruned); errors.Is(err, ledger.ErrPrunedOverlap) {
			return usageErrorf("%s: %v (written there since the copy began); copy again", where, err)
		} else if err != nil {
			return maskErr(err, opts.URL)
		}
	}
	// In flight by the source's clock: a PostgreSQL ledger's reservations
	// live by the database's clock, not this machine's.
	var now time.Time
	if err := src.View(ctx, func(r ledger.WindowReader) error { now = r.Now(); return nil }); err != nil {
		return err
	}
	rows, seen, inFlight, err := copyRows(ctx, src, dstImp, opts.PageRows, now)
	if err != nil {
		return maskErr(err, opts.URL)
	}
	if inFlight > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "warning: not copied: %d requests still in flight (reservations within their deadline plus grace); copy again once they have ended\n", inFlight)
	}
	recs, err := srcImp.LearnedRecords(ctx)
	if err != nil {
		return err
	}
	learnedAdded := 0
	if len(recs) > 0 {
		if learnedAdded, err = dstImp.ImportLearned(ctx, recs, now, learned.StoreCapacity, learned.Retention); err != nil {
			return maskErr(err, opts.URL)
		}
	}
	if dropped {
		fmt.Fprintf(opts.IO.ErrOut, "warning: not copied (--drop-pruned): the usage of %d requests before %s, pruned from the rows (kept only in the current ledger's rollups); %s reads only its own usage there\n",
			pruned.Requests(), pruned.Until.Format(time.RFC3339), where)
	}
	added := rows + len(plan.budgets) + len(plan.tokens) + pricesAdded + learnedAdded
	if added == 0 && prunedAdded == 0 && inFlight == 0 {
		fmt.Fprintf(opts.IO.Out, "nothing to copy: %s already holds all %d rows, the budgets, tokens, prices and learned state\n", where, seen)
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "copied to %s: %d rows (%d already there), %d budgets, %d tokens, %d prices, %d learned records\n",
		where, rows, seen-rows, len(plan.budgets), len(plan.tokens), pricesAdded, learnedAdded)
	if prunedAdded > 0 {
		fmt.Fprintf(opts.IO.Out, "copied the pruned usage of %d requests before %s (rollups only, as on the current ledger)\n", prunedAdded, pruned.Until.Format(time.RFC3339))
	}
	return nil
}

// prunedPlan says what a copy does with the source's pruned usage.
type prunedPlan struct {
	// carry: the target holds no usage before the cut; the pruned usage
	// goes into its rollups.
	carry bool
	// skip: the target already reads it (a second copy, or a copy made
	// before the prune).
	skip bool
}

// planPruned decides, before anything is written, whether p (src's pruned
// usage) can be carried into dst: only into a target without usage before
// the cut, since usage without rows has no request ids to skip by. A
// target that already reads the same usage there (its own pruned usage is
// p, or its report before the cut is src's by every key, as after a copy
// made before the prune) needs nothing. Neither: the caller refuses, or
// drops p with --drop-pruned.
func planPruned(ctx context.Context, src, dst ledger.Ledger, p ledger.PrunedUsage) (prunedPlan, error) {
	if p.Empty() {
		return prunedPlan{skip: true}, nil
	}
	if imp, ok := dst.(ledger.Importer); ok {
		own, err := imp.PrunedUsage(ctx)
		if err != nil {
			return prunedPlan{}, err
		}
		if own.Equal(p) {
			return prunedPlan{skip: true}, nil
		}
	}
	_, end := p.Bounds()
	q := ledger.ReportQuery{From: time.UnixMilli(0), To: time.UnixMilli(end), By: ledger.ReportKeys}
	there, err := dst.Report(ctx, q)
	if err != nil {
		return prunedPlan{}, err
	}
	if len(there) == 0 {
		return prunedPlan{carry: true}, nil
	}
	here, err := src.Report(ctx, q)
	if err != nil {
		return prunedPlan{}, err
	}
	return prunedPlan{skip: slices.EqualFunc(here, there, sameReportRow)}, nil
}

func sameReportRow(a, b ledger.ReportRow) bool {
	return slices.Equal(a.Keys, b.Keys) && a.Requests == b.Requests && a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens &&
		a.TotalTokens == b.TotalTokens && a.TokensUnknown == b.TokensUnknown && a.InputUnknown == b.InputUnknown && a.OutputUnknown == b.OutputUnknown &&
		a.CostMicros == b.CostMicros && a.CostKnown == b.CostKnown && a.Errors == b.Errors && a.CachedInputTokens == b.CachedInputTokens &&
		a.ReasoningTokens == b.ReasoningTokens && a.CachedUnknown == b.CachedUnknown && a.ReasoningUnknown == b.ReasoningUnknown && a.CostUnknown == b.CostUnknown
}

// copyPlan is what a copy adds besides rows, and what stops it.
type copyPlan struct {
	budgets   []ledger.BudgetRecord
	tokens    []ledger.ClientToken
	prices    []ledger.Price
	conflicts []string
}

// planCopy compares the budgets, tokens and prices of src and dst by name:
// missing ones are to copy, equal ones are skipped, others conflict.
func planCopy(ctx context.Context, src, dst ledger.Ledger) (copyPlan, error) {
	var p copyPlan
	sb, err := src.Budgets(ctx)
	if err != nil {
		return p, err
	}
	db, err := dst.Budgets(ctx)
	if err != nil {
		return p, err
	}
	have := map[string]ledger.BudgetRecord{}
	for _, b := range db {
		have[b.Name] = b
	}
	for _, b := range sb {
		d, ok := have[b.Name]
		switch {
		case !ok:
			p.budgets = append(p.budgets, b)
		case d.Kind != b.Kind || d.Limit != b.Limit || d.Window != b.Window:
			p.conflicts = append(p.conflicts, fmt.Sprintf("budget %s: %s %d per %s here, %s %d per %s there", b.Name, b.Kind, b.Limit, b.Window, d.Kind, d.Limit, d.Window))
		}
	}
	st, err := src.ClientTokens(ctx)
	if err != nil {
		return p, err
	}
	dt, err := dst.ClientTokens(ctx)
	if err != nil {
		return p, err
	}
	byLabel, byHash := map[string][32]byte{}, map[[32]byte]string{}
	for _, t := range dt {
		byLabel[t.Label], byHash[t.Hash] = t.Hash, t.Label
	}
	for _, t := range st {
		h, ok := byLabel[t.Label]
		switch {
		case ok && h == t.Hash:
		case ok:
			p.conflicts = append(p.conflicts, fmt.Sprintf("token %s: another token of that label is stored there", t.Label))
		case byHash[t.Hash] != "":
			p.conflicts = append(p.conflicts, fmt.Sprintf("token %s: the same token is stored there as %s", t.Label, byHash[t.Hash]))
		default:
			p.tokens = append(p.tokens, t)
		}
	}
	sp, err := src.Prices(ctx)
	if err != nil {
		return p, err
	}
	dp, err := dst.Prices(ctx)
	if err != nil {
		return p, err
	}
	models := make([]string, 0, len(sp))
	for m := range sp {
		models = append(models, m)
	}
	slices.Sort(models)
	for _, m := range models {
		s := sp[m]
		d, ok := dp[m]
		switch {
		case !ok:
			p.prices = append(p.prices, s)
		case d.InputMicros != s.InputMicros || d.OutputMicros != s.OutputMicros || d.CachedInputMicros != s.CachedInputMicros:
			p.conflicts = append(p.conflicts, fmt.Sprintf("price %s: other per-token prices there", m))
		}
	}
	return p, nil
}

// copyRows moves every row of src into dst a page at a time, in time
// order, and returns how many dst added and how many src holds. A page
// starts at the last page's last millisecond, which it may read again:
// the target skips rows it holds.
// A reservation still in flight at now is not copied (inFlight counts
// them): a row moves once, by request id, so one copied open would stay
// open on the target, and count as unknown usage there once it expired,
// after its request had settled on the source.
func copyRows(ctx context.Context, src ledger.Ledger, dst ledger.Importer, page int, now time.Time) (added, seen, inFlight int, err error) {
	if page <= 0 {
		page = 2000
	}
	from, end := time.UnixMilli(0), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	last := map[string]bool{} // request ids of the rows at from, already moved
	limit := page
	for {
		rows, err := src.Rows(ctx, from, end, limit)
		if err != nil {
			return added, seen, inFlight, fmt.Errorf("read rows: %w", err)
		}
		fresh := rows[:0:0]
		for _, r := range rows {
			switch {
			case r.Time.Equal(from) && last[r.RequestID]:
			case !r.Settled && r.Expires.After(now) && !r.Time.Before(now.Add(-ledger.MaxInFlight)):
				inFlight++
			default:
				fresh = append(fresh, r)
			}
		}
		if len(fresh) > 0 {
			n, err := dst.ImportRows(ctx, fresh)
			if err != nil {
				return added, seen, inFlight, err
			}
			added += n
			seen += len(fresh)
		}
		if len(rows) < limit {
			return added, seen, inFlight, nil
		}
		next := rows[len(rows)-1].Time
		if next.Equal(from) && len(fresh) == 0 {
			limit *= 2 // a page of one millisecond: read more of it
			continue
		}
		if !next.Equal(from) {
			clear(last)
		}
		for _, r := range rows {
			if r.Time.Equal(next) {
				last[r.RequestID] = true
			}
		}
		if !next.Equal(from) {
			limit = page
		}
		from = next
	}
}

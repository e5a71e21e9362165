// Package conformance is the ledger's conformance suite: the rules of
// ledger.Ledger (DESIGN, "Ledger and budgets", "Prices and cost", "A team
// ledger on PostgreSQL"), run through the interface only against every
// engine: SQLite (ledger/conformance_test.go) and PostgreSQL
// (ledger/pgledger/conformance_test.go). The same tests run on both; where
// the engines differ by design, the difference is a field of Engine, never
// a skip.
//
// Test support only: deadcode without -test lists it, on purpose
// (`deadcode -test ./...` is the check).
package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// Engine says how the suite reaches one ledger engine.
type Engine struct {
	// Name names the engine in messages ("sqlite", "postgres").
	Name string
	// Create makes a new, empty database for the test t (no schema yet)
	// and returns its address: a file path, a URL. It is removed when t
	// ends.
	Create func(t *testing.T) string
	// Migrate brings the database at addr to this binary's schema, as
	// `rotor ledger migrate` does. It returns the engine's error as is.
	Migrate func(ctx context.Context, addr string) error
	// Open opens a handle on the database at addr, as one rotor process
	// does, taking times from clk; a nil clk leaves times to the engine
	// (the real clock, or the database's now()). It returns the engine's
	// error as is.
	// Every handle stands for another process; the suite closes them.
	Open func(ctx context.Context, addr string, clk clock.Clock) (ledger.Ledger, error)
	// OpenMigrates is true when Open itself brings an older schema up to
	// date (SQLite, one machine's file). When false, Open refuses an
	// older schema with ledger.ErrSchemaTooOld and changes nothing
	// (PostgreSQL: bridges never migrate a shared schema on their own).
	OpenMigrates bool
	// SchemaVersion is the schema version this binary writes.
	SchemaVersion int
	// SetSchemaVersion stores v as the schema version of the database at
	// addr, as a newer rotor would have left it. No handle is open.
	SetSchemaVersion func(t *testing.T, addr string, v int)
	// Queued reports how many writes wait in l's queue behind the batch
	// it runs (ledger.GroupCommit.Len), so that a test can put writes in
	// one batch without a sleep.
	Queued func(l ledger.Ledger) int
	// Snapshot returns the whole content of the database at addr, so
	// that two snapshots are equal exactly when nothing changed between
	// them. No handle is open.
	Snapshot func(t *testing.T, addr string) []byte
}

// t0 is the suite's epoch: a Monday, 10:17:23 UTC, at millisecond
// precision like stored times.
var t0 = time.Date(2026, 11, 30, 10, 17, 23, 0, time.UTC)

// Run runs the suite against e.
func Run(t *testing.T, e Engine) {
	if e.Create == nil || e.Migrate == nil || e.Open == nil || e.SetSchemaVersion == nil || e.Queued == nil || e.Snapshot == nil || e.SchemaVersion <= 0 {
		t.Fatalf("conformance: engine %q is missing a field", e.Name)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, e Engine)
	}{
		// Reservation and settlement.
		{"ReserveSettleReleaseAreDurableWhenTheyReturn", testDurable},
		{"SettleAndReleaseNeedAnOpenReservation", testSettleReleaseErrors},
		{"SecondCloseOfAReservationInOneBatchIsNotFound", testCloseTwiceInOneBatch},
		{"LateCloseOfAReservationResolvedElsewhereIsNotFound", testCloseAfterResolvedElsewhere},
		{"RefusedAdmissionWritesNothing", testRefusedAdmission},
		{"EndedRequestContextWritesNothing", testCancelledReservation},
		{"CloseCommitsQueuedWrites", testCloseCommits},
		{"TwoHandlesAdmitExactlyTheRequestsBudget", testExactAdmission},
		{"AdmissionSeesAnotherHandlesRows", testAdmissionSeesAnotherHandlesRows},
		// Windows.
		{"RowLeavesRollingWindowExactlyItsLengthLater", testRollingEdge},
		{"CalendarWindowsStartAtUTCBoundaries", testCalendarEdges},
		{"CalendarBudgetCountsARequestAtItsFirstMillisecond", testCalendarFirstMillisecond},
		{"WindowEndingNowCountsRowsStampedAfterAClockStepBack", testClockSteppedBack},
		{"WindowsAcrossHoursAndDaysMatchRawRows", testWindowsAcrossDays},
		{"ExhaustedRequestsBudgetFreesWhenOldestRowLeaves", testFreesAt},
		{"TokensBudgetSkipsUnknownAndStopsAtLimit", testTokensBudget},
		// Unknown cost and tokens.
		{"OpenReservationCountsAsUnknownNeverZero", testOpenReservationUnknown},
		{"ReservationOlderThanMaxInFlightIsUnknownCost", testMaxInFlight},
		{"AdmissionTakesAReservationOlderThanMaxInFlightForUnknownCost", testMaxInFlightAtAdmission},
		{"UnreadableUsageIsUnknownNeverZero", testNullUsage},
		{"CostBudgetFailsClosedOnUnknownCostUntilItLeaves", testCostFailClosed},
		{"FailClosedFreesWhenTheUnknownRowLeavesNotTheRequestInFlight", testFailClosedFreesAtSkipsInFlight},
		{"TokensBudgetUnknownRowsSkipRequestsInFlight", testTokensUnknownRowsSkipInFlight},
		{"CostBudgetRefusesDecisionsAndUnpricedModels", testCostPolicy},
		{"OnSettleTellsEachCommittedSettlementAsItsRow", testOnSettle},
		// Reports.
		{"ReportGroupsMatchRawRows", testReportGroups},
		{"ReportShowsUnknownTokensAndCostAsUnknown", testReportUnknown},
		{"ReportErrorsAreStatus400UpNoStatusOrACodeAlsoOnceResolved", testReportErrors},
		{"ReportRefusesUnknownGroupKey", testReportBadKey},
		// Budgets.
		{"BudgetsAddReplaceRemove", testBudgetsCRUD},
		{"BudgetChangeThroughAnotherHandleBindsNextAdmission", testChangeCounter},
		// Client tokens.
		{"ClientTokensAddReplaceRevokeLookup", testTokensCRUD},
		{"TokenRevokedThroughAnotherHandleRefusedAtNextAdmission", testTokenRevokedElsewhere},
		{"TouchTokensKeepsTheLatestUse", testTouchTokens},
		// Prices and cost.
		{"PricesPutListRemove", testPricesCRUD},
		{"CostRoundsHalfUpFromThePriceTakenAtAdmission", testCostAtAdmission},
		{"PriceChangeThroughAnotherHandleBindsNextAdmission", testPriceElsewhere},
		// Resolve.
		{"ResolveGivesUnknownRowsUsageAndCost", testResolve},
		{"ResolveRefusesKnownMissingAndInvalid", testResolveErrors},
		// Rows.
		{"RowsRoundTripInTimeOrder", testRows},
		{"WithoutATestClockRowTimesAreTheEnginesNow", testEngineClock},
		// ledger prune.
		{"PruneKeepsReportsAndBudgetWindows", testPruneKeepsReads},
		{"PruneReachInPrunedTimeNeverEarlierInItsMinute", testPruneReach},
		{"PruneRefusedByCheckChangesNothing", testPruneRefused},
		{"PruneEarlierThanTheLastChangesNothing", testPruneEarlierAfterLater},
		{"PruneAdmissionWindowOverPrunedTimeIsExact", testPruneAdmissionWindowSlides},
		{"PruneMidHourCutsAtItsHourAndKeepsEveryRead", testPruneMidHour},
		{"PruneMinuteOfOnlyRequestsInFlightHoldsNoUnknownCost", testPruneInFlightMinute},
		// ledger copy.
		{"ImportCopiesRowsOnceAndCountsThem", testImport},
		{"ImportPrunedUsageKeepsReadsOnceAndRefusesOverlap", testImportPruned},
		{"ImportPrunedUsageLeavesTheCutsFirstMinuteToItsRows", testImportPrunedCutMinute},
		// Learned state.
		{"LearnedRecordsRevisionsAndExpiry", testLearned},
		{"LearnedCapacityRefusesNewRecordsKeepsUpdates", testLearnedCapacity},
		{"ImportLearnedKeepsCapacityAndRetention", testImportLearnedBounds},
		{"LearnedConcurrentPutsNoLostUpdateNoOverflow", testLearnedConcurrentPuts},
		// Migrations.
		{"EmptyDatabaseMigratesToCurrentSchema", testMigrateEmpty},
		{"ConcurrentMigrationsAgree", testConcurrentMigrate},
		{"NewerSchemaRefusedDatabaseUnchanged", testNewerSchema},
	}
	// Every test makes a database of its own (fresh) and shares nothing
	// else, so they run in parallel: much of the suite waits on fsyncs or
	// on the PostgreSQL server, and the longest tests (the prune cuts)
	// then overlap with the rest.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, e)
		})
	}
}

// db is one test's database and the clock every handle on it reads.
type db struct {
	t    *testing.T
	e    Engine
	addr string
	clk  *clock.Fake
}

// fresh creates, migrates and returns a new database for t, with a fake
// clock at t0, and a first handle on it.
func fresh(t *testing.T, e Engine) (*db, ledger.Ledger) {
	t.Helper()
	d := &db{t: t, e: e, addr: e.Create(t), clk: clock.NewFake(t0)}
	if err := e.Migrate(ctx, d.addr); err != nil {
		t.Fatalf("%s: Migrate: %v", e.Name, err)
	}
	return d, d.open()
}

// open opens another handle (another process) on the database, closed
// when the test ends unless the test closes it first.
func (d *db) open() ledger.Ledger {
	d.t.Helper()
	l, err := d.e.Open(ctx, d.addr, d.clk)
	if err != nil {
		d.t.Fatalf("%s: Open: %v", d.e.Name, err)
	}
	c := &closeOnce{Ledger: l}
	d.t.Cleanup(func() { _ = c.Close() })
	return c
}

// closeOnce closes its handle once, whether the test or its cleanup asks
// first.
type closeOnce struct {
	ledger.Ledger
	once sync.Once
	err  error
}

func (c *closeOnce) Close() error {
	c.once.Do(func() { c.err = c.Ledger.Close() })
	return c.err
}

var ctx = context.Background()

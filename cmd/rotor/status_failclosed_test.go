package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// rotor status prints a fail-closed budget's used as unknown, as budget
// list does: its window holds usage of unknown cost, so the number the
// ledger sums is not what was spent.
// The bridge's document has used null then; an older bridge's has the
// partial sum, which the table does not print either.
func TestStatusTableShowsUnknownUsedWhileFailClosed(t *testing.T) {
	for name, spendUsed := range map[string]string{"null": `"used":null,"remaining":null`, "older bridge": `"used":1234567,"remaining":3765433`} {
		t.Run(name, func(t *testing.T) { testStatusFailClosed(t, spendUsed) })
	}
}

func testStatusFailClosed(t *testing.T, spendUsed string) {
	spend, daily := statusBudgetRows(t, `{"name":"spend","kind":"cost","window":"day","limit":5000000,`+spendUsed+`,"unknown_rows":2,"state":"fail-closed","frees_at":"2026-12-01T00:00:00Z"}`)
	if !strings.Contains(spend, "unknown") || strings.Contains(spend, "1234567") {
		t.Errorf("fail-closed budget row %q: want used unknown, never the partial sum", spend)
	}
	if !strings.Contains(daily, " 3 ") {
		t.Errorf("ok budget row %q lost its used", daily)
	}
}

// statusBudgetRows runs rotor status's table on a bridge whose status
// document holds the budget spend (JSON) and a requests budget daily of
// 3 used of 10, and returns the table rows of the two.
func statusBudgetRows(t *testing.T, spend string) (spendRow, dailyRow string) {
	t.Helper()
	const token = "status-test-token-0123456789abcdef0123456789"
	doc := `{"version":"t","time":"2026-11-30T12:00:00Z","pools":[],"budgets":[` + spend + `,` +
		`{"name":"daily","kind":"requests","window":"day","limit":10,"used":3,"remaining":7,"unknown_rows":0,"state":"ok"}]}`
	client := func() *http.Client {
		return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			rec := httptest.NewRecorder()
			rec.Write([]byte(doc))
			return rec.Result(), nil
		})}
	}
	f, out, _ := fakeFactory(t, nil, map[string]string{"ROTOR_TOKEN": token})
	opts := &statusOptions{IO: f.IO, Config: f.Config, Home: f.Home, LookupEnv: f.LookupEnv, HTTPClient: client, URL: "http://bridge.invalid", Format: FormatTable}
	if err := statusRun(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(l, "spend"):
			spendRow = l
		case strings.Contains(l, "daily"):
			dailyRow = l
		}
	}
	return spendRow, dailyRow
}

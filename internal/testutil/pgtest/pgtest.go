// Package pgtest gives a test a PostgreSQL schema of its own, on the server
// ROTOR_TEST_POSTGRES names (for example
// postgres://postgres@127.0.0.1:5432/test). Unset, the test is skipped with
// a message, except in CI (CI=true), where it fails: CI has a PostgreSQL.
// Test support only.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env is the variable that names the test server.
const Env = "ROTOR_TEST_POSTGRES"

// Server returns the URL of the test server, skipping (or, in CI, failing)
// the test when there is none.
func Server(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set, but CI must run the PostgreSQL tests (.ci/run sets it)", Env)
		}
		t.Skipf("%s is not set: set it to a PostgreSQL URL (postgres://postgres@127.0.0.1:5432/test) to run the PostgreSQL tests", Env)
	}
	return base
}

// Schema creates an empty schema of a random name on the test server, drops
// it when the test ends, and returns a URL whose connections use it
// (search_path) and the schema's name.
func Schema(t testing.TB) (dbURL, schema string) {
	t.Helper()
	base := Server(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "rotor_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("%s: cannot reach the test PostgreSQL: %v", Env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

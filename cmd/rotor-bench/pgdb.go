package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/internal/dburl"
)

// defaultPostgres is the PostgreSQL `-db postgres` uses when
// ROTOR_TEST_POSTGRES is unset: this machine's, as the tests use it.
const defaultPostgres = "postgres://postgres@127.0.0.1:5432/test"

// benchDB resolves -db to the URL rotor gets as ROTOR_DB: "" or "sqlite"
// is the SQLite file in rotor's home (""); "postgres" is a new schema of
// its own on ROTOR_TEST_POSTGRES (or this machine's server), dropped by
// the returned func; a postgres:// URL is used as it is (its schema must
// be empty or migrated; nothing is dropped).
func benchDB(ctx context.Context, db string) (dbURL string, drop func(), err error) {
	switch {
	case db == "" || db == "sqlite":
		return "", func() {}, nil
	case dburl.IsPostgres(db):
		return db, func() {}, nil
	case db != "postgres":
		return "", nil, fmt.Errorf("-db %q: want sqlite, postgres or a postgres:// URL", db)
	}
	base := os.Getenv("ROTOR_TEST_POSTGRES")
	if base == "" {
		base = defaultPostgres
	}
	schema := "rotor_bench_" + strings.ToLower(rand.Text()[:10])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("-db postgres: %s: %v", dburl.Mask(base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("-db postgres: create schema %s: %v", schema, err)
	}
	drop = func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestSchemaIsOwnAndUsedByItsURL(t *testing.T) {
	u, schema := Schema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != schema {
		t.Fatalf("current_schema() = %q, want %q", got, schema)
	}
	u2, schema2 := Schema(t)
	if schema2 == schema || u2 == u {
		t.Fatalf("two calls gave the same schema %q", schema)
	}
}

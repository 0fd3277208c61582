package store

import (
	"fmt"
	"testing"
)

// TestSchemaVersionStatementMatches: the statement that records the schema
// version records sqliteSchemaVersion.
func TestSchemaVersionStatementMatches(t *testing.T) {
	if want := fmt.Sprintf("PRAGMA user_version = %d", sqliteSchemaVersion); sqliteSetSchemaVersion != want {
		t.Fatalf("sqliteSetSchemaVersion = %q, want %q", sqliteSetSchemaVersion, want)
	}
}

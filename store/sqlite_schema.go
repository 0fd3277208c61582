package store

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/dqnflow/dqnflow/migrations"
)

// sqliteSchemaVersion is the schema of a new SQLite file, stored in
// PRAGMA user_version: 1 is the tables of sqliteMigrations. A migration
// that changes them is a new schema version, with the statements that
// bring a file of the version before up to it.
const sqliteSchemaVersion = 1

// sqliteSetSchemaVersion records sqliteSchemaVersion in the file (a PRAGMA
// takes no parameters, so the number is part of the constant statement;
// TestSchemaVersionStatementMatches keeps the two in step).
const sqliteSetSchemaVersion = `PRAGMA user_version = 1`

// sqliteMigrations are the migrations of migrations/ whose tables the
// SQLite store keeps, and sqlitePostgresOnly those it does not: 00005
// holds the walk-forward studies, which the SQLite store refuses
// (ErrWalkForwardSQLite). TestSQLiteSchemaCoversEveryMigration fails on a
// migration in neither list.
var (
	sqliteMigrations = []string{
		"00001_runs_and_epochs.sql",
		"00002_checkpoints_and_backtests.sql",
		"00003_promotions.sql",
		"00004_run_executions.sql",
	}
	sqlitePostgresOnly = []string{"00005_walkforward.sql"}
)

// sqliteSchema is the schema a new SQLite file gets: the Up sections of
// sqliteMigrations, read from migrations.FS and written in SQLite's dialect
// by sqliteDDL.
func sqliteSchema() (string, error) {
	var ups []string
	for _, name := range sqliteMigrations {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			return "", fmt.Errorf("SQLite schema: %w", err)
		}
		up, err := gooseUp(string(b))
		if err != nil {
			return "", fmt.Errorf("SQLite schema: migration %s: %w", name, err)
		}
		ups = append(ups, up)
	}
	ddl, err := sqliteDDL(ups...)
	if err != nil {
		return "", fmt.Errorf("SQLite schema: %w", err)
	}
	return ddl, nil
}

// gooseUp is the Up section of a goose SQL migration, without comments.
func gooseUp(src string) (string, error) {
	var up []string
	in := false
	for line := range strings.Lines(src) {
		t := strings.TrimSpace(line)
		switch {
		case t == "-- +goose Up":
			in = true
			continue
		case strings.HasPrefix(t, "-- +goose Down"):
			in = false
			continue
		case strings.HasPrefix(t, "-- +goose"):
			return "", fmt.Errorf("goose annotation %q is not supported by the SQLite schema", t)
		}
		if !in {
			continue
		}
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		if strings.TrimSpace(line) != "" {
			up = append(up, strings.TrimRight(line, " \t\r\n"))
		}
	}
	if len(up) == 0 {
		return "", fmt.Errorf("no -- +goose Up section")
	}
	return strings.Join(up, "\n"), nil
}

// sqliteTable is a table being built from the migrations' statements.
type sqliteTable struct {
	name        string
	columns     []string // column definitions, PostgreSQL's dialect
	constraints []string // table constraints
}

// column is the index of column name in t, or -1.
func (t *sqliteTable) column(name string) int {
	return slices.IndexFunc(t.columns, func(def string) bool { return firstWord(def) == name })
}

var (
	createTable = regexp.MustCompile(`(?is)^CREATE TABLE (\w+) \((.*)\)$`)
	addColumn   = regexp.MustCompile(`(?is)^ALTER TABLE (\w+) ADD COLUMN (.+)$`)
	setNotNull  = regexp.MustCompile(`(?is)^ALTER TABLE (\w+) ALTER COLUMN (\w+) SET NOT NULL$`)
	createIndex = regexp.MustCompile(`(?is)^CREATE (UNIQUE )?INDEX \w+ ON (\w+) .+$`)
	update      = regexp.MustCompile(`(?is)^UPDATE \w+ SET .+$`)
)

// sqliteDDL runs the statements of the PostgreSQL migrations ups, in
// order, on a model of the tables (CREATE TABLE, ALTER TABLE ... ADD
// COLUMN and ALTER COLUMN ... SET NOT NULL, CREATE INDEX) and writes the
// tables they leave in SQLite's dialect, then the indexes. UPDATEs are
// left out: they move rows of an existing database, and the schema is
// only ever created in an empty one. Any other statement is an error, so
// that a migration this translation does not understand fails the tests
// instead of changing the SQLite store's schema silently.
func sqliteDDL(ups ...string) (string, error) {
	var tables []*sqliteTable
	var indexes []string
	table := func(name string) (*sqliteTable, error) {
		for _, t := range tables {
			if t.name == name {
				return t, nil
			}
		}
		return nil, fmt.Errorf("table %s does not exist", name)
	}
	for _, up := range ups {
		for stmt := range strings.SplitSeq(up, ";") {
			stmt = strings.TrimSpace(stmt)
			if stmt == "" {
				continue
			}
			oneLine := strings.Join(strings.Fields(stmt), " ")
			switch {
			case createTable.MatchString(stmt):
				m := createTable.FindStringSubmatch(stmt)
				t := &sqliteTable{name: m[1]}
				for _, item := range splitTopLevel(m[2]) {
					switch strings.ToUpper(firstWord(item)) {
					case "UNIQUE", "CHECK", "PRIMARY", "FOREIGN", "CONSTRAINT":
						t.constraints = append(t.constraints, item)
					default:
						t.columns = append(t.columns, item)
					}
				}
				tables = append(tables, t)
			case addColumn.MatchString(oneLine):
				m := addColumn.FindStringSubmatch(oneLine)
				t, err := table(m[1])
				if err != nil {
					return "", fmt.Errorf("%s: %w", oneLine, err)
				}
				t.columns = append(t.columns, m[2])
			case setNotNull.MatchString(oneLine):
				m := setNotNull.FindStringSubmatch(oneLine)
				t, err := table(m[1])
				if err != nil {
					return "", fmt.Errorf("%s: %w", oneLine, err)
				}
				i := t.column(m[2])
				if i < 0 {
					return "", fmt.Errorf("%s: table %s has no column %s", oneLine, m[1], m[2])
				}
				name, typ, rest := splitColumn(t.columns[i])
				t.columns[i] = strings.TrimSpace(name + " " + typ + " NOT NULL " + rest)
			case createIndex.MatchString(oneLine):
				indexes = append(indexes, oneLine)
			case update.MatchString(oneLine):
			default:
				return "", fmt.Errorf("statement %q is not one the SQLite schema translates", oneLine)
			}
		}
	}
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "CREATE TABLE %s (\n", t.name)
		var items []string
		for _, c := range t.columns {
			def, err := sqliteColumn(c)
			if err != nil {
				return "", fmt.Errorf("table %s: %w", t.name, err)
			}
			items = append(items, "    "+def)
		}
		for _, c := range t.constraints {
			items = append(items, "    "+strings.Join(strings.Fields(c), " "))
		}
		b.WriteString(strings.Join(items, ",\n"))
		b.WriteString("\n);\n")
	}
	for _, ix := range indexes {
		b.WriteString(ix + ";\n")
	}
	return b.String(), nil
}

// sqliteTypes are the storage of each PostgreSQL column type: JSON as
// text, times as Unix nanoseconds (UTC), booleans as 0 or 1.
var sqliteTypes = map[string]string{
	"text":             "TEXT",
	"integer":          "INTEGER",
	"bigint":           "INTEGER",
	"double precision": "REAL",
	"jsonb":            "TEXT",
	"timestamptz":      "INTEGER",
	"boolean":          "INTEGER",
}

var (
	jsonbTypeof = regexp.MustCompile(`jsonb_typeof\((\w+)\) = '(\w+)'`)
	hexMatch    = regexp.MustCompile(`(\w+) ~ '\^\[0-9a-f\]\{(\d+)\}\$'`)
	defaultCall = regexp.MustCompile(`DEFAULT \w+\(`)
)

// sqliteColumn is a PostgreSQL column definition in SQLite's dialect.
// Defaults of now() go (the SQLite store writes every time itself), a
// jsonb column checks that it holds valid JSON, a regular expression of
// lower-case hex becomes its length and a GLOB, and a boolean column
// checks that it holds 0 or 1.
func sqliteColumn(def string) (string, error) {
	def = strings.Join(strings.Fields(def), " ")
	name, typ, rest := splitColumn(def)
	if typ == "bigint" && strings.HasPrefix(rest, "GENERATED ALWAYS AS IDENTITY PRIMARY KEY") && strings.TrimSpace(strings.TrimPrefix(rest, "GENERATED ALWAYS AS IDENTITY PRIMARY KEY")) == "" {
		return name + " INTEGER PRIMARY KEY AUTOINCREMENT", nil
	}
	st, ok := sqliteTypes[typ]
	if !ok {
		return "", fmt.Errorf("column %s: type %q has no SQLite counterpart here", name, typ)
	}
	rest = strings.TrimSpace(strings.ReplaceAll(rest, "DEFAULT now()", ""))
	rest = jsonbTypeof.ReplaceAllString(rest, "json_valid($1) AND json_type($1) = '$2'")
	rest = hexMatch.ReplaceAllString(rest, "length($1) = $2 AND $1 NOT GLOB '*[^0-9a-f]*'")
	if typ == "boolean" {
		rest = strings.ReplaceAll(strings.ReplaceAll(rest, "DEFAULT false", "DEFAULT 0"), "DEFAULT true", "DEFAULT 1")
		rest = strings.TrimSpace(rest + " CHECK (" + name + " IN (0, 1))")
	}
	for _, pg := range []string{"now()", "jsonb", "~", "::", "[]", "GENERATED", "false", "true"} {
		if strings.Contains(rest, pg) {
			return "", fmt.Errorf("column %s: %q has no SQLite counterpart here: %s", name, pg, def)
		}
	}
	if defaultCall.MatchString(rest) {
		return "", fmt.Errorf("column %s: a default computed by a PostgreSQL function has no SQLite counterpart here: %s", name, def)
	}
	return strings.TrimSpace(name + " " + st + " " + rest), nil
}

// splitColumn splits a column definition into its name, its type (one
// word, or "double precision") and the rest.
func splitColumn(def string) (name, typ, rest string) {
	f := strings.Fields(def)
	if len(f) < 2 {
		return def, "", ""
	}
	name, typ, f = f[0], f[1], f[2:]
	if typ == "double" && len(f) > 0 && f[0] == "precision" {
		typ, f = "double precision", f[1:]
	}
	return name, typ, strings.Join(f, " ")
}

// firstWord is the first word of s.
func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// splitTopLevel splits a table body at the commas outside parentheses
// and quotes.
func splitTopLevel(body string) []string {
	var items []string
	depth, quoted, start := 0, false, 0
	for i, r := range body {
		switch {
		case r == '\'':
			quoted = !quoted
		case quoted:
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			items = append(items, strings.TrimSpace(body[start:i]))
			start = i + 1
		}
	}
	if s := strings.TrimSpace(body[start:]); s != "" {
		items = append(items, s)
	}
	return items
}

package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sqlMethods are the database calls whose second argument (after the
// context) is SQL text: pgx's and database/sql's.
var sqlMethods = map[string]bool{
	"Exec": true, "Query": true, "QueryRow": true,
	"ExecContext": true, "QueryContext": true, "QueryRowContext": true,
	"Prepare": true, "PrepareContext": true, "Queue": true,
}

// isQuotedIdentifier reports whether e is pgx.Identifier{...}.Sanitize(): an
// identifier (a database's name in CREATE DATABASE) cannot be a $n
// parameter, and pgx quotes it, doubling any quote inside, so it is
// spliced as one name whatever it holds.
func isQuotedIdentifier(e *ast.CallExpr) bool {
	sel, ok := e.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Sanitize" || len(e.Args) != 0 {
		return false
	}
	lit, ok := sel.X.(*ast.CompositeLit)
	if !ok {
		return false
	}
	typ, ok := lit.Type.(*ast.SelectorExpr)
	if !ok || typ.Sel.Name != "Identifier" {
		return false
	}
	pkg, ok := typ.X.(*ast.Ident)
	return ok && pkg.Name == "pgx"
}

// fromMigrations reports whether arg is a variable of fn assigned the
// result of sqliteSchema(): the SQLite schema, translated from the
// migrations compiled into the binary, is as constant as a literal and
// holds no value.
func fromMigrations(fn *ast.FuncDecl, arg ast.Expr) bool {
	id, ok := arg.(*ast.Ident)
	if !ok || fn == nil {
		return false
	}
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 || len(as.Lhs) == 0 {
			return true
		}
		lhs, ok := as.Lhs[0].(*ast.Ident)
		call, isCall := as.Rhs[0].(*ast.CallExpr)
		if ok && isCall && lhs.Name == id.Name && len(call.Args) == 0 {
			if f, ok := call.Fun.(*ast.Ident); ok && f.Name == "sqliteSchema" {
				found = true
			}
		}
		return true
	})
	return found
}

// TestEverySQLStatementIsParameterised reads the store's source and checks
// that the SQL text of every database call is a compile-time constant
// (string literals and package constants, concatenated), so that every
// value reaches the server as a $n parameter and none is spliced into the
// text. SQL passed through a helper's parameter is followed to every call
// of the helper. It fails on any SQL built at run time (fmt.Sprintf, a
// variable), naming the file and line. A quoted identifier
// (isQuotedIdentifier) is the one run-time part allowed, and the SQLite
// schema (fromMigrations) the one run-time statement.
func TestEverySQLStatementIsParameterised(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	consts := map[string]bool{}
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok == token.CONST {
					for _, s := range d.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							consts[n.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				funcs[d.Name.Name] = d
			}
		}
	}
	var isConst func(ast.Expr) bool
	isConst = func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.BasicLit:
			return e.Kind == token.STRING
		case *ast.Ident:
			return consts[e.Name]
		case *ast.ParenExpr:
			return isConst(e.X)
		case *ast.BinaryExpr:
			return e.Op == token.ADD && isConst(e.X) && isConst(e.Y)
		case *ast.CallExpr:
			return isQuotedIdentifier(e)
		}
		return false
	}
	// paramIndex returns the index of name among fn's parameters, or -1.
	paramIndex := func(fn *ast.FuncDecl, name string) int {
		i := 0
		for _, field := range fn.Type.Params.List {
			for _, n := range field.Names {
				if n.Name == name {
					return i
				}
				i++
			}
		}
		return -1
	}
	// helpers maps a function name to the index of its parameter that
	// carries SQL text to a database call.
	helpers := map[string]int{}
	statements := map[token.Pos]bool{}
	reported := map[token.Pos]bool{}
	check := func(fn *ast.FuncDecl, call *ast.CallExpr, arg ast.Expr, what string) {
		if isConst(arg) || fromMigrations(fn, arg) {
			statements[call.Pos()] = true
			return
		}
		if id, ok := arg.(*ast.Ident); ok && fn != nil {
			if i := paramIndex(fn, id.Name); i >= 0 {
				helpers[fn.Name.Name] = i
				return
			}
		}
		if !reported[call.Pos()] {
			reported[call.Pos()] = true
			t.Errorf("%s: the SQL of %s is built at run time, not a constant: pass values as $n parameters", fset.Position(call.Pos()), what)
		}
	}
	for range 3 { // helpers of helpers
		for _, f := range files {
			for _, d := range f.Decls {
				fn, _ := d.(*ast.FuncDecl)
				if fn == nil || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					switch fun := call.Fun.(type) {
					case *ast.SelectorExpr:
						if sqlMethods[fun.Sel.Name] && len(call.Args) >= 2 {
							check(fn, call, call.Args[1], fun.Sel.Name)
						}
					case *ast.Ident:
						if i, ok := helpers[fun.Name]; ok && i < len(call.Args) {
							check(fn, call, call.Args[i], fun.Name)
						}
					}
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						if i, ok := helpers[sel.Sel.Name]; ok && i < len(call.Args) && funcs[sel.Sel.Name] != nil {
							check(fn, call, call.Args[i], sel.Sel.Name)
						}
					}
					return true
				})
			}
		}
	}
	if len(statements) < 20 {
		t.Fatalf("found only %d SQL statements in the store's source: the audit no longer sees them", len(statements))
	}
	t.Logf("%d SQL call sites checked, all constant; helpers carrying SQL: %v", len(statements), helpers)
}

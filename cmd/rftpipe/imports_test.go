package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestCommandImports: the command line maps flags and prints; it imports at
// most 10 of the module's packages, none of stages/* (the builder and the
// packages doing the work hold what it needs).
func TestCommandImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/rftpipe/rftpipe/"
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) {
				seen[strings.TrimPrefix(path, module)] = true
			}
		}
	}
	var pkgs []string
	for p := range seen {
		pkgs = append(pkgs, p)
		if strings.HasPrefix(p, "stages/") {
			t.Errorf("cmd imports %s", p)
		}
	}
	sort.Strings(pkgs)
	if len(pkgs) > 10 {
		t.Errorf("cmd imports %d of the module's packages, at most 10: %v", len(pkgs), pkgs)
	}
}

package main

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

func readmeText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readmeFlagList is the README's node flag list: from "Node flags" to the
// pointer at `go run ./cmd/node -h`.
func readmeFlagList(t *testing.T, readme string) string {
	t.Helper()
	start := strings.Index(readme, "Node flags")
	end := strings.Index(readme, "go run ./cmd/node -h")
	if start < 0 || end < start {
		t.Fatal(`README.md has no node flag list ("Node flags" ... "go run ./cmd/node -h")`)
	}
	return readme[start:end]
}

// TestREADME_listsEveryNodeFlag fails when a flag of the node's real
// FlagSet is missing from the README's node flag list.
func TestREADME_listsEveryNodeFlag(t *testing.T) {
	list := readmeFlagList(t, readmeText(t))
	for _, name := range nodeFlagNames(t) {
		if !regexp.MustCompile("`--" + regexp.QuoteMeta(name) + "[` =]").MatchString(list) {
			t.Errorf("README.md's node flag list lacks `--%s`", name)
		}
	}
}

// readmePackages lists the paths named in the first column of the README's
// package table ("| `ring/`, `membership/` | ...").
func readmePackages(readme string) []string {
	var out []string
	for _, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`([^`]+/)`").FindAllStringSubmatch(first, -1) {
			out = append(out, strings.TrimSuffix(m[1], "/"))
		}
	}
	return out
}

// TestREADME_packageTableHasEveryTopLevelPackage fails when a top-level
// directory holding Go code has no row (its own, or one of a directory
// under it) in the README's package table, or a row names a directory
// that does not exist.
func TestREADME_packageTableHasEveryTopLevelPackage(t *testing.T) {
	rows := readmePackages(readmeText(t))
	if len(rows) < 20 {
		t.Fatalf("found %d package rows in README.md", len(rows))
	}
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || !hasGo(t, filepath.Join("../..", e.Name())) {
			continue
		}
		if !slices.ContainsFunc(rows, func(r string) bool { return r == e.Name() || strings.HasPrefix(r, e.Name()+"/") }) {
			t.Errorf("README.md's package table has no row for %s/", e.Name())
		}
	}
	for _, r := range rows {
		if st, err := os.Stat(filepath.Join("../..", r)); err != nil || !st.IsDir() {
			t.Errorf("README.md's package table names %s/, which is not a directory", r)
		}
	}
}

func hasGo(t *testing.T, dir string) bool {
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// layerImports reads docs/architecture.md's layer diagram: package ->
// the packages its line says it imports.
func layerImports(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Layers")
	if start < 0 {
		t.Fatal("docs/architecture.md has no ## Layers")
	}
	block := doc[start:]
	open := strings.Index(block, "```\n")
	end := strings.Index(block[open+4:], "```")
	if open < 0 || end < 0 {
		t.Fatal("docs/architecture.md's layers have no diagram")
	}
	out := map[string][]string{}
	for _, line := range strings.Split(block[open+4:open+4+end], "\n") {
		m := regexp.MustCompile(`^  ([a-z]+)/\s`).FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var imports []string // after an arrow set apart by two spaces; descriptions use " → "
		if a := regexp.MustCompile(`\s{2,}→ (.*)$`).FindStringSubmatch(line); a != nil {
			imports = strings.Fields(a[1])
		}
		slices.Sort(imports)
		out[m[1]] = imports
	}
	return out
}

// goImports lists the top-level packages of weir that the non-test files
// of dir import (generated api/ code aside).
func goImports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/weirhq/weir/"
	self := filepath.Base(dir)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(path, mod) {
				continue
			}
			top, _, _ := strings.Cut(strings.TrimPrefix(path, mod), "/")
			if top != "api" && top != self && !slices.Contains(out, top) {
				out = append(out, top)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestArchitecture_layersMatchImports fails when docs/architecture.md's
// layer diagram lacks a library package, names one that is gone, or says
// a package imports other packages of weir than it does.
func TestArchitecture_layersMatchImports(t *testing.T) {
	layers := layerImports(t)
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	notLibraries := []string{"api", "bench", "chaos", "cmd", "deploy"}
	for _, e := range entries {
		dir := filepath.Join("../..", e.Name())
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || slices.Contains(notLibraries, e.Name()) || !hasGo(t, dir) {
			continue
		}
		want, ok := layers[e.Name()]
		if !ok {
			t.Errorf("docs/architecture.md's layer diagram has no line for %s/", e.Name())
			continue
		}
		if got := goImports(t, dir); !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md says %s/ imports %v; it imports %v", e.Name(), want, got)
		}
	}
	for name := range layers {
		if _, err := os.Stat(filepath.Join("../..", name)); err != nil {
			t.Errorf("docs/architecture.md's layer diagram names %s/, which does not exist", name)
		}
	}
}

// TestREADME_deniedAnswerIsComplete: the denied answer the README shows
// decodes as a DecideResponse and carries every field, as the node writes
// it (server.TestHTTP_decide_denied checks the node's side).
func TestREADME_deniedAnswerIsComplete(t *testing.T) {
	readme := readmeText(t)
	at := strings.Index(readme, "The fourth answer, denied")
	open := strings.Index(readme[max(at, 0):], "```json\n")
	if at < 0 || open < 0 {
		t.Fatal("README.md shows no denied JSON answer")
	}
	body := readme[at+open+len("```json\n"):]
	body = body[:strings.Index(body, "```")]
	var resp weirv1.DecideResponse
	if err := protojson.Unmarshal([]byte(body), &resp); err != nil || resp.Allowed || len(resp.Limits) == 0 {
		t.Fatalf("README's denied answer: %v, %v", &resp, err)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	fields := resp.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if _, ok := raw[string(fields.Get(i).Name())]; !ok {
			t.Errorf("README's denied answer lacks %q", fields.Get(i).Name())
		}
	}
}

package actorlimit_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The code of the README (and of docs/*.md) is copied from the examples,
// which compile and run with the tests. A block is tied to its source by an
// HTML comment on the line before its fence:
//
//	<!-- example: ExampleStart in example_test.go -->
//
// The Go block must then be a run of consecutive lines of that function's
// body (the "// Output:" comment and what follows it left out), compared
// line by line with the indentation and blank lines ignored. A block that
// starts with "package main" is a whole program instead: its main body must
// be the example's whole body, and its imports the example file's, so that
// it compiles as it stands.
//
//	<!-- api: actorlimit -->
//
// marks the README's list of the root package's functions and methods: it
// must list every exported one, with its signature as written in the
// source, and nothing else (comments after a signature are free).
//
//	<!-- file: examples/mochi-like/rules.yaml -->
//
// marks a block (of any language) that is a run of consecutive lines of
// that file.
//
// Every Go block of the README has a marker; in docs/*.md only the marked
// blocks are checked.

var (
	exampleMarker = regexp.MustCompile(`^<!-- example: (\w+) in ([\w./-]+) -->$`)
	apiMarker     = regexp.MustCompile(`^<!-- api: actorlimit -->$`)
	fileMarker    = regexp.MustCompile(`^<!-- file: ([\w./-]+) -->$`)
)

// snippet is one fenced block of a Markdown file.
type snippet struct {
	line     int    // the line of its opening fence
	lang     string // after the fence: "go", "sh", ...
	marker   string // the line before the fence
	function string // from an example marker
	file     string // from an example or file marker, relative to the repository's root
	code     string
}

// snippets returns the fenced blocks of the Markdown file at path.
func snippets(t *testing.T, path string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var (
		out      []snippet
		cur      *snippet // the Go block being read
		inFence  bool
		previous string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !inFence && strings.HasPrefix(trimmed, "```"):
			inFence = true
			cur = &snippet{line: n, lang: strings.TrimPrefix(trimmed, "```"), marker: strings.TrimSpace(previous)}
			if m := exampleMarker.FindStringSubmatch(cur.marker); m != nil {
				cur.function, cur.file = m[1], m[2]
			}
			if m := fileMarker.FindStringSubmatch(cur.marker); m != nil {
				cur.file = m[1]
			}
		case inFence && trimmed == "```":
			inFence = false
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
		case cur != nil:
			cur.code += line + "\n"
		}
		previous = line
	}
	require.NoError(t, sc.Err())
	require.False(t, inFence, "%s: a code block is not closed", path)
	return out
}

// normalize returns the non-blank lines of code without their indentation,
// up to a "// Output:" comment.
func normalize(code string) []string {
	var out []string
	for line := range strings.SplitSeq(code, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "// Output:") || strings.HasPrefix(line, "// Unordered output:") {
			break
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// parsed is a Go file and its source.
type parsed struct {
	fset *token.FileSet
	file *ast.File
	src  []byte
}

func parseGo(name string, src []byte) (parsed, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	return parsed{fset, f, src}, err
}

// body returns the source between the braces of the function named name.
func (p parsed) body(name string) (string, bool) {
	for _, d := range p.file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
			continue
		}
		from := p.fset.Position(fn.Body.Lbrace).Offset + 1
		to := p.fset.Position(fn.Body.Rbrace).Offset
		return string(p.src[from:to]), true
	}
	return "", false
}

// imports returns the sorted import paths of the file.
func (p parsed) imports() []string {
	var out []string
	for _, s := range p.file.Imports {
		path, _ := strconv.Unquote(s.Path.Value)
		out = append(out, path)
	}
	slices.Sort(out)
	return out
}

// contains reports whether want is a run of consecutive lines of have.
func contains(have, want []string) bool {
	if len(want) == 0 {
		return false
	}
	for i := 0; i+len(want) <= len(have); i++ {
		if slices.Equal(have[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// checkSnippet returns what is wrong with s, or "".
func checkSnippet(s snippet) string {
	src, err := os.ReadFile(filepath.FromSlash(s.file))
	if err != nil {
		return err.Error()
	}
	example, err := parseGo(s.file, src)
	if err != nil {
		return err.Error()
	}
	body, ok := example.body(s.function)
	if !ok {
		return fmt.Sprintf("%s has no function %s", s.file, s.function)
	}
	if !strings.HasPrefix(strings.TrimSpace(s.code), "package main") {
		if !contains(normalize(body), normalize(s.code)) {
			return fmt.Sprintf("the block is not a run of lines of %s in %s", s.function, s.file)
		}
		return ""
	}
	program, err := parseGo("README program", []byte(s.code))
	if err != nil {
		return err.Error()
	}
	for _, d := range program.file.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "main" {
			continue
		}
		return "a program block holds its imports and func main, nothing else"
	}
	main, ok := program.body("main")
	switch {
	case !ok:
		return "the program has no func main"
	case !slices.Equal(normalize(main), normalize(body)):
		return fmt.Sprintf("func main's body is not the body of %s in %s", s.function, s.file)
	case !slices.Equal(program.imports(), example.imports()):
		return fmt.Sprintf("the program imports %q, %s imports %q", program.imports(), s.file, example.imports())
	}
	return ""
}

// TestReadmeSnippets: every Go block of the README is an example's code,
// as its marker says, or the list of the API; so are the marked blocks of
// docs/*.md; and the blocks marked with a file are that file's lines.
func TestReadmeSnippets(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	checked, apis := 0, 0
	for _, path := range append([]string{"README.md"}, docs...) {
		for _, s := range snippets(t, path) {
			switch {
			case s.lang == "go" && apiMarker.MatchString(s.marker):
				apis++
				assert.Empty(t, checkAPI(t, s.code), "%s line %d: the list of the API", path, s.line)
			case s.lang == "go" && s.function != "":
				checked++
				assert.Empty(t, checkSnippet(s), "%s line %d: the block marked %s in %s", path, s.line, s.function, s.file)
			case s.file != "":
				checked++
				assert.Empty(t, checkFileExcerpt(s), "%s line %d: the block marked with %s", path, s.line, s.file)
			case s.lang == "go":
				assert.NotEqual(t, "README.md", path, "README.md line %d: a Go block without a marker (<!-- example: Func in file -->) on the line before it", s.line)
			}
		}
	}
	assert.Positive(t, checked, "no block was checked")
	assert.Equal(t, 1, apis, "README.md lists the API once")
}

// checkFileExcerpt returns what is wrong with a block marked with a file, or "".
func checkFileExcerpt(s snippet) string {
	src, err := os.ReadFile(filepath.FromSlash(s.file))
	if err != nil {
		return err.Error()
	}
	if !contains(normalize(string(src)), normalize(s.code)) {
		return "the block is not a run of lines of " + s.file
	}
	return ""
}

// exportedAPI returns the signatures of the root package's exported
// functions and methods, as written in its source, without their doc.
func exportedAPI(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		p, err := parseGo(name, src)
		require.NoError(t, err)
		for _, d := range p.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			if fn.Recv != nil && !receiverExported(fn.Recv) {
				continue
			}
			from := p.fset.Position(fn.Type.Pos()).Offset
			to := p.fset.Position(fn.Type.End()).Offset
			out = append(out, strings.Join(strings.Fields(string(src[from:to])), " "))
		}
	}
	slices.Sort(out)
	return out
}

// receiverExported reports whether a method's receiver type is exported.
func receiverExported(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// checkAPI returns how the list of the API differs from the package's
// exported functions and methods, or "".
func checkAPI(t *testing.T, code string) string {
	var listed []string
	for line := range strings.SplitSeq(code, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			listed = append(listed, line)
		}
	}
	slices.Sort(listed)
	want := exportedAPI(t)
	var problems []string
	for _, w := range want {
		if !slices.Contains(listed, w) {
			problems = append(problems, "missing: "+w)
		}
	}
	for _, l := range listed {
		if !slices.Contains(want, l) {
			problems = append(problems, "not in the package: "+l)
		}
	}
	return strings.Join(problems, "; ")
}

// TestCheckSnippet: the check finds a block that is not its example's,
// a program whose imports or body differ, and a wrong marker.
func TestCheckSnippet(t *testing.T) {
	program := func(imports, body string) string {
		return "package main\n\nimport (\n" + imports + ")\n\nfunc main() {\n" + body + "}\n"
	}
	startImports := "\t\"context\"\n\t\"fmt\"\n\t\"time\"\n\n\t\"github.com/actorlimit/actorlimit\"\n"
	startBody, ok := func() (string, bool) {
		src, err := os.ReadFile("example_test.go")
		require.NoError(t, err)
		p, err := parseGo("example_test.go", src)
		require.NoError(t, err)
		return p.body("ExampleStart")
	}()
	require.True(t, ok)
	tests := []struct {
		name     string
		function string
		code     string
		wantOK   bool
	}{
		{"an excerpt", "ExampleStart", "lim, err := actorlimit.Start()\nif err != nil {\n\tpanic(err)\n}\n", true},
		{"an excerpt, reindented", "ExampleStart", "  lim, err := actorlimit.Start()\n\n  if err != nil {\n panic(err)\n}\n", true},
		{"lines that are not consecutive", "ExampleStart", "lim, err := actorlimit.Start()\ndefer lim.Close()\n", false},
		{"a changed line", "ExampleStart", "lim, err := actorlimit.Start(actorlimit.WithShards(2))\n", false},
		{"the output", "ExampleStart", "// allowed: true count: 1\n", false},
		{"another function", "Example", "lim, err := actorlimit.Start()\n", false},
		{"no such function", "ExampleNothing", "lim, err := actorlimit.Start()\n", false},
		{"the whole program", "ExampleStart", program(startImports, startBody), true},
		{"a program missing an import", "ExampleStart", program("\t\"context\"\n\t\"fmt\"\n\n\t\"github.com/actorlimit/actorlimit\"\n", startBody), false},
		{"a program with part of the body", "ExampleStart", program(startImports, "lim, err := actorlimit.Start()\n_, _ = lim, err\n"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problem := checkSnippet(snippet{function: tt.function, file: "example_test.go", code: tt.code})
			if tt.wantOK {
				assert.Empty(t, problem)
			} else {
				assert.NotEmpty(t, problem)
			}
		})
	}
}

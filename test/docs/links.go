// Package docs checks the repository's Markdown: every relative link
// points at a file that exists and every anchor at a heading that does, as
// GitHub renders them; external links are not fetched (the tests have no
// network), only held to a list of known sites.
package docs

import (
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"

	"github.com/probed-dev/probed/internal/docgen"
)

// Link is one link of a Markdown file.
type Link struct {
	// File is the repository-relative path of the file that holds it.
	File string
	// Line is its 1-based line.
	Line int
	// Dest is the link's destination, as written.
	Dest string
}

// Doc is what the check needs of a Markdown file.
type Doc struct {
	Links []Link
	// Anchors are its headings' anchors.
	Anchors map[string]bool
}

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// Parse reads the Markdown src of the repository-relative file name.
func Parse(name string, src []byte) Doc {
	d := Doc{Anchors: map[string]bool{}}
	root := md.Parser().Parse(text.NewReader(src), parser.WithContext(parser.NewContext()))
	slugs := docgen.Slugger{}
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			d.Anchors[slugs.Slug(plainText(n, src))] = true
		case *ast.Link:
			d.Links = append(d.Links, Link{File: name, Line: lineOf(n, src), Dest: string(n.Destination)})
		case *ast.Image:
			d.Links = append(d.Links, Link{File: name, Line: lineOf(n, src), Dest: string(n.Destination)})
		case *ast.AutoLink:
			d.Links = append(d.Links, Link{File: name, Line: lineOf(n, src), Dest: string(n.URL(src))})
		}
		return ast.WalkContinue, nil
	})
	return d
}

// plainText is a heading's text as GitHub slugs it: its text and code
// spans, without markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// lineOf is the line of the first text inside n (links and images have no
// position of their own), or of the nearest block around it.
func lineOf(n ast.Node, src []byte) int {
	offset := -1
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering && offset < 0 {
			offset = t.Segment.Start
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	for p := n; offset < 0 && p != nil; p = p.Parent() {
		if p.Type() == ast.TypeBlock && p.Lines().Len() > 0 {
			offset = p.Lines().At(0).Start
		}
	}
	if offset < 0 {
		return 0
	}
	return 1 + strings.Count(string(src[:offset]), "\n")
}

// Files are the repository's Markdown files, repository-relative, sorted:
// every *.md outside .cache, .git and testdata.
func Files(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case ".cache", ".git", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// External reports whether dest leaves the repository: it has a scheme
// (https:, mailto:, ...).
func External(dest string) bool {
	u, err := url.Parse(dest)
	return err == nil && u.Scheme != ""
}

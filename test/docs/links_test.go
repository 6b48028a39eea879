package docs

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/probed-dev/probed/test/harness/repo"
)

// knownSites are the external links the docs may hold. Links are not
// fetched: a new site is a choice to make here, not a surprise in a
// rendered page.
var knownSites = []*regexp.Regexp{
	// The project's own home, its releases and tags (CHANGELOG, runbooks).
	regexp.MustCompile(`^https://github\.com/probed-dev/probed(/|$)`),
	// Upstream issues, pull requests and advisories the docs cite.
	regexp.MustCompile(`^https://github\.com/(kubernetes|kubernetes-sigs|openkruise|argoproj|istio|containerd|grpc|prometheus|golang)/[^/]+/(issues|pull|security/advisories)/`),
	regexp.MustCompile(`^https://(kubernetes\.io|keepachangelog\.com|semver\.org|prometheus\.io|helm\.sh|krew\.sigs\.k8s\.io|pkg\.go\.dev)/`),
}

// Every relative link of every Markdown file in the repository resolves
// (the file or directory exists, and an anchor names a heading of the
// Markdown file it points into, as GitHub makes anchors), and every
// external link is to a known site. No network: external links are only
// listed (go test -v prints them).
func TestLinks(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]Doc{}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = Parse(f, src)
	}
	for _, f := range []string{"README.md", "CONTRIBUTING.md", "SECURITY.md", "charts/probed/README.md", "docs/install.md", "docs/flags.md"} {
		if _, ok := docs[f]; !ok {
			t.Errorf("%s was not checked", f)
		}
	}
	external := map[string][]string{}
	for _, f := range files {
		for _, l := range docs[f].Links {
			if External(l.Dest) {
				external[l.Dest] = append(external[l.Dest], fmt.Sprintf("%s:%d", l.File, l.Line))
				continue
			}
			if why := resolve(root, docs, l); why != "" {
				t.Errorf("%s:%d: link %q: %s", l.File, l.Line, l.Dest, why)
			}
		}
	}
	for dest, where := range external {
		known := false
		for _, re := range knownSites {
			known = known || re.MatchString(dest)
		}
		if !known {
			t.Errorf("%s: external link %q to a site not in knownSites", strings.Join(where, ", "), dest)
		}
		t.Logf("external, not fetched: %s (%s)", dest, strings.Join(where, ", "))
	}
}

// resolve says why a relative link does not resolve, or "".
func resolve(root string, docs map[string]Doc, l Link) string {
	u, err := url.Parse(l.Dest)
	if err != nil {
		return err.Error()
	}
	if u.Path == "" && u.Fragment == "" {
		return "empty"
	}
	target := l.File
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return "an absolute path: GitHub resolves it against the site, not the repository"
		}
		target = path.Clean(path.Join(path.Dir(l.File), u.Path))
		if target == ".." || strings.HasPrefix(target, "../") {
			return "leaves the repository"
		}
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
		if err != nil {
			return "no such file or directory"
		}
		if st.IsDir() && u.Fragment != "" {
			return "an anchor in a directory"
		}
	}
	if u.Fragment == "" {
		return ""
	}
	d, ok := docs[target]
	if !ok {
		if regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`).MatchString(u.Fragment) {
			return "" // a line of a source file, as GitHub shows it
		}
		return "an anchor in a file that is not Markdown"
	}
	if !d.Anchors[u.Fragment] {
		return fmt.Sprintf("%s has no heading with anchor #%s", target, u.Fragment)
	}
	return ""
}

package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/repo"
)

// releaseLink is a link into the repository at a tag or branch.
var releaseLink = regexp.MustCompile(regexp.QuoteMeta(Home) + `/blob/[^/\s]+/`)

// releaseLinkFiles hold links to the docs of the release (VERSION's tag),
// which -update moves to a new VERSION.
var releaseLinkFiles = []string{PrometheusRulePath, "test/monitoring/rules_test.yaml", RunbooksPath, "charts/probed/Chart.yaml"}

// The alerts' runbook links and the chart's home point at the docs shipped
// with this release (its tag): in the PrometheusRule (TestAlertsHaveRunbooks
// holds each link to its alert's section), in runbooks.yaml, from which
// kustomize builds them, and in Chart.yaml. docs/observability.md's
// kustomization that moves them elsewhere does, as written. With -update,
// the links move to VERSION's tag (a release's first commit).
func TestRunbookLinks(t *testing.T) {
	base, err := RunbookBase()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		retagReleaseLinks(t, strings.TrimSuffix(base, DocPath))
	}
	var runbooks struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	readYAML(t, RunbooksPath, &runbooks)
	if runbooks.Data["baseURL"] != base {
		t.Errorf("%s: baseURL %q, want %q, this release's docs", RunbooksPath, runbooks.Data["baseURL"], base)
	}
	if runbooks.Metadata.Annotations["config.kubernetes.io/local-config"] != "true" {
		t.Errorf("%s is not local-config: kustomize would apply it", RunbooksPath)
	}
	var chart struct {
		Home string `json:"home"`
	}
	readYAML(t, "charts/probed/Chart.yaml", &chart)
	if want, _ := ReleaseDoc("README.md"); chart.Home != want {
		t.Errorf("charts/probed/Chart.yaml: home %q, want %q, this release's README", chart.Home, want)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the kustomizations are not rendered")
	}
	checkRunbookURLs(t, "deploy/monitoring", kustomizeRules(t, kubectl, RepoPath("deploy/monitoring")), base)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := repo.DocBlock(root, DocPath, "yaml", "# my-monitoring/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const wiki = "https://wiki.example.org/probed/observability.md"
	if !strings.Contains(doc, "baseURL: "+wiki+"\n") {
		t.Fatalf("%s's kustomization does not set baseURL to %s:\n%s", DocPath, wiki, doc)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "probed")); err != nil {
		t.Fatal(err)
	}
	my := filepath.Join(dir, "my-monitoring")
	if err := os.Mkdir(my, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(my, "kustomization.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	checkRunbookURLs(t, DocPath+"'s my-monitoring", kustomizeRules(t, kubectl, my), wiki)
}

// kustomizeRules renders dir and returns its PrometheusRule's alerts'
// runbook_url by alert.
func kustomizeRules(t *testing.T, kubectl, dir string) map[string]string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	urls := map[string]string{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		var obj struct {
			Kind string   `json:"kind"`
			Spec RuleFile `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ConfigMap" && strings.Contains(doc, "probed-runbooks") {
			t.Errorf("kubectl kustomize %s outputs the local-config ConfigMap probed-runbooks", dir)
		}
		if obj.Kind != "PrometheusRule" {
			continue
		}
		for _, a := range obj.Spec.Alerts() {
			urls[a.Alert] = a.Annotations["runbook_url"]
		}
	}
	return urls
}

// checkRunbookURLs: every alert of the shipped rules has a runbook_url of
// base and its own anchor in urls.
func checkRunbookURLs(t *testing.T, what string, urls map[string]string, base string) {
	t.Helper()
	rules, err := LoadPlainRules()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rules.Alerts() {
		if want := base + "#" + strings.ToLower(a.Alert); urls[a.Alert] != want {
			t.Errorf("%s: %s's runbook_url %q, want %q", what, a.Alert, urls[a.Alert], want)
		}
	}
}

func readYAML(t *testing.T, rel string, into any) {
	t.Helper()
	b, err := os.ReadFile(RepoPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// retagReleaseLinks points every release link of releaseLinkFiles at
// prefix (the repository at VERSION's tag) and regenerates the files made
// from them: the plain rule file and the chart's copies.
func retagReleaseLinks(t *testing.T, prefix string) {
	t.Helper()
	for _, rel := range releaseLinkFiles {
		b, err := os.ReadFile(RepoPath(rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(RepoPath(rel), releaseLink.ReplaceAll(b, []byte(prefix)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := GeneratePlainRules()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(RepoPath(PlainRulesPath), plain, 0o644); err != nil {
		t.Fatal(err)
	}
	for copyPath, src := range chartFiles {
		b, err := os.ReadFile(RepoPath(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(RepoPath(copyPath), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

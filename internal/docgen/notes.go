package docgen

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
)

// Section returns what doc holds under the line heading (say "## probed"),
// up to the next heading of that level or a higher one.
func Section(doc []byte, heading string) (string, error) {
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	if level == 0 {
		return "", fmt.Errorf("%q is not a Markdown heading", heading)
	}
	lines := strings.SplitAfter(string(doc), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, "\n") == heading {
			if start >= 0 {
				return "", fmt.Errorf("two headings %q", heading)
			}
			start = i + 1
		}
	}
	if start < 0 {
		return "", fmt.Errorf("no heading %q", heading)
	}
	var b strings.Builder
	fence := ""
	for _, l := range lines[start:] {
		t := strings.TrimSpace(l)
		if fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
		} else if fence != "" && strings.HasPrefix(t, fence) {
			fence = ""
		} else if fence == "" {
			if n := len(l) - len(strings.TrimLeft(l, "#")); n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
				break
			}
		}
		b.WriteString(l)
	}
	return b.String(), nil
}

var noted = regexp.MustCompile("\\*\\*`([^`]+)`\\*\\*")

// Noted lists the names a section's hand-written notes are about: every
// "**`name`**" in it, in order.
func Noted(section string) []string {
	var out []string
	for _, m := range noted.FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	return out
}

// CheckNoted fails when a note under heading in the file at path is about
// a name known does not know (a flag or a metric that is gone), or when the
// section has no notes at all (the heading moved).
func CheckNoted(path, heading string, known func(string) bool) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	section, err := Section(doc, heading)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	names := Noted(section)
	if len(names) == 0 {
		return fmt.Errorf("%s: no notes (**`name`**) under %q", path, heading)
	}
	var unknown []string
	for _, n := range names {
		if !known(n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%s, under %q: notes about %s, which the code does not define", path, heading, strings.Join(unknown, ", "))
	}
	return nil
}

// FlagKnown is CheckNoted's known for a flag set: "--name" of one of its
// flags.
func FlagKnown(fs *pflag.FlagSet) func(string) bool {
	return func(s string) bool {
		name, ok := strings.CutPrefix(s, "--")
		return ok && fs.Lookup(name) != nil
	}
}

// FamilyKnown is CheckNoted's known for metric families: one of their names.
func FamilyKnown(families []Family) func(string) bool {
	return func(s string) bool {
		for _, f := range families {
			if f.Name == s {
				return true
			}
		}
		return false
	}
}

// The files the generated tables live in, repository-relative.
const (
	FlagsDoc   = "docs/flags.md"
	MetricsDoc = "docs/observability.md"
)

// Table keeps one generated table and its hand-written notes in step with
// the code: Sync of the region r in the file at path, then CheckNoted of
// the notes under heading.
func Table(path string, update bool, cmd string, r Region, heading string, known func(string) bool) error {
	return errors.Join(Sync(path, update, cmd, r), CheckNoted(path, heading, known))
}

//go:build release

package release

import (
	"bytes"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, ARG, COPY, RUN, ...
	args string
}

// parseDockerfile splits a Dockerfile into instructions: comment lines
// dropped, lines ending in a backslash joined to the next (the default
// escape character; this Dockerfile sets no other).
func parseDockerfile(t *testing.T, b []byte) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends inside a continued line: %q", cur.String())
	}
	return out
}

// flagsAndRest splits an instruction's leading --flags from its arguments.
func flagsAndRest(args string) (flags map[string]string, rest []string) {
	flags = map[string]string{}
	fields := strings.Fields(args)
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(fields[0], "--"), "=")
		flags[k] = v
		fields = fields[1:]
	}
	return flags, fields
}

// buildContext decides, as BuildKit does, which files of the context
// .dockerignore lets into the build.
type buildContext struct {
	root string
	pm   *patternmatcher.PatternMatcher
}

func newBuildContext(t *testing.T, root string) buildContext {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return buildContext{root: root, pm: pm}
}

// copyInto copies the context's src (a file or a directory, whose contents
// are copied as COPY does) to dst, leaving out what .dockerignore excludes.
func (c buildContext) copyInto(t *testing.T, src, dst string) int {
	t.Helper()
	n := 0
	base := filepath.Join(c.root, filepath.FromSlash(path.Clean(src)))
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		excluded, err := c.pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil || excluded {
			return err
		}
		within, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		target := dst
		if within != "." {
			target = filepath.Join(dst, within)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		n++
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
	return n
}

// argRef is a ${NAME} or $NAME reference in an instruction.
var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// The Dockerfile's build stage compiles from exactly what it copies in:
// its COPY lines' sources, less what .dockerignore excludes, at its WORKDIR,
// its RUN commands run in order with its ARGs' defaults (TARGETARCH, which
// BuildKit sets, is this machine's), its flags as written. Every binary a
// later stage copies out of it (the default target's probed and the webhook
// target's probed-webhook) is then there, a static executable stamped
// with the Dockerfile's default version. Docker itself is not needed: this
// is what `docker build` runs inside the golang image. In the release tier
// the image builds before it have compiled every package the same way
// (static, -trimpath), so only the two links run.
func TestDockerfileBuildStageCompiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs the build stage's commands as the linux image would")
	}
	const repo = "../.."
	b, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ins := parseDockerfile(t, b)
	ctx := newBuildContext(t, repo)
	root := t.TempDir() // the build stage's file system
	args := map[string]string{"TARGETARCH": runtime.GOARCH, "TARGETOS": "linux", "BUILDPLATFORM": "linux/" + runtime.GOARCH}
	workdir := "/"
	stage := ""
	var runs int
	var outputs []string // what later stages copy from the build stage
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			fields := strings.Fields(in.args)
			stage = ""
			if n := len(fields); n >= 3 && strings.EqualFold(fields[n-2], "AS") {
				stage = fields[n-1]
			}
			continue
		case "ARG":
			name, def, hasDef := strings.Cut(in.args, "=")
			if _, set := args[name]; !set || hasDef {
				args[name] = def
			}
			continue
		}
		if stage != "build" {
			if in.cmd == "COPY" {
				flags, rest := flagsAndRest(in.args)
				if flags["from"] == "build" {
					outputs = append(outputs, rest[:len(rest)-1]...)
				}
			}
			continue
		}
		expand := func(s string) string {
			return argRef.ReplaceAllStringFunc(s, func(ref string) string {
				return args[argRef.FindStringSubmatch(ref)[1]]
			})
		}
		switch in.cmd {
		case "WORKDIR":
			workdir = path.Join(workdir, expand(in.args))
		case "COPY":
			flags, rest := flagsAndRest(in.args)
			if len(flags) > 0 || len(rest) < 2 {
				t.Fatalf("COPY %s: this test copies from the context only, with no flags", in.args)
			}
			dst := filepath.Join(root, filepath.FromSlash(path.Join(workdir, rest[len(rest)-1])))
			for _, src := range rest[:len(rest)-1] {
				to := dst
				if fi, err := os.Stat(filepath.Join(repo, src)); err == nil && !fi.IsDir() {
					to = filepath.Join(dst, path.Base(src))
				}
				if n := ctx.copyInto(t, src, to); n == 0 {
					t.Errorf("COPY %s: .dockerignore lets no file of it in", src)
				}
			}
		case "RUN":
			_, rest := flagsAndRest(in.args) // --mount=type=cache: Go's caches here
			script := strings.Join(rest, " ")
			// Absolute paths outside the source tree are the stage's own.
			script = regexp.MustCompile(`(-o\s+)(/)`).ReplaceAllString(script, "${1}"+root+"/")
			cmd := exec.Command("sh", "-ec", script)
			cmd.Dir = filepath.Join(root, filepath.FromSlash(workdir))
			// The golang image's environment: none of the test's Go settings.
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != "CGO_ENABLED" && k != "GOOS" && k != "GOARCH" && k != "GOFLAGS" {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			for k, v := range args {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the build stage's RUN fails:\n  %s\n%v\n%s", script, err, out)
			}
			t.Logf("RUN %.60s... (%v)", script, time.Since(start).Round(time.Millisecond))
			runs++
		}
	}
	if runs == 0 || len(outputs) < 2 {
		t.Fatalf("found %d RUN lines in the build stage and %d binaries copied out of it (%v); want both targets'", runs, len(outputs), outputs)
	}
	for _, o := range outputs {
		p := filepath.Join(root, filepath.FromSlash(o))
		f, err := elf.Open(p)
		if err != nil {
			t.Errorf("%s, which a later stage copies from the build stage: %v", o, err)
			continue
		}
		if f.Section(".interp") != nil {
			t.Errorf("%s is dynamically linked; the image is FROM scratch", o)
		}
		f.Close()
		out, err := exec.Command(p, "--version").CombinedOutput()
		want := path.Base(o) + " " + args["VERSION"] + " "
		if err != nil || !bytes.HasPrefix(out, []byte(want)) {
			t.Errorf("%s --version: %q (%v), want %q...", o, out, err, want)
		}
	}
}

package probespec

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// aliasBomb is the annotation: one exec command whose first
// argument is an anchored string of anchorBytes and whose others are
// aliases of it, size bytes in all. Converted, each alias repeats the
// anchor's whole string.
func aliasBomb(anchorBytes, size int) string {
	head := "app:\n  livenessProbe:\n    exec:\n      command: [&a \"" + strings.Repeat("x", anchorBytes) + "\""
	n := (size - len(head) - len("]\n")) / len(", *a")
	return head + strings.Repeat(", *a", n) + "]\n"
}

// execArgs is an annotation whose app liveness probe runs a command of n
// arguments "a", written as YAML.
func execArgs(n int) string {
	return "app: {livenessProbe: {exec: {command: [" + strings.Repeat("a,", n-1) + "a]}}}"
}

// atTheBounds is a valid YAML annotation just under MaxAnnotationBytes
// and MaxYAMLNodes, whose probes have reach: an exec command at
// MaxExecArgs, and an httpGet probe with many headers.
func atTheBounds() string {
	var b strings.Builder
	b.WriteString("app:\n  livenessProbe:\n    exec:\n      command: [")
	for i := range MaxExecArgs {
		fmt.Fprintf(&b, "%s%s", map[bool]string{true: "", false: ", "}[i == 0], strings.Repeat("y", 40))
	}
	b.WriteString("]\n  readinessProbe:\n    httpGet:\n      port: 80\n      httpHeaders:\n")
	for b.Len() < MaxAnnotationBytes-64 {
		b.WriteString("      - {name: X-A, value: b}\n")
	}
	return b.String()
}

// TestAnnotationLimits: the annotation is bounded input, and what is over
// a bound is refused with a text naming the field and the bound.
func TestAnnotationLimits(t *testing.T) {
	const whole = `annotation "probed.io/probes": `
	const refusedAnchor = "(YAML anchors and aliases are refused: they expand without limit)"
	longArg := strings.Repeat("x", MaxExecBytes)
	tooLong := `{"app": {"livenessProbe": {"exec": {"command": ["` + strings.Repeat("x", MaxAnnotationBytes) + `"]}}}}`
	// "\0" is two bytes of YAML and six of JSON ("\u0000").
	escapes := "app: {livenessProbe: {exec: {command: [\"" + strings.Repeat(`\0`, 15<<10) + "\"]}}}"
	escapesJSON := len(`{"app":{"livenessProbe":{"exec":{"command":[""]}}}}`) + 6*(15<<10)
	for _, tc := range []struct {
		name, annotation string
		want             []string
	}{
		{"an alias bomb", aliasBomb(1<<10, 8<<10), []string{
			whole + "app.livenessProbe.exec.command[0]: must have no YAML anchors: found &a " + refusedAnchor}},
		{"a merge key", "base: &base {periodSeconds: 1}\napp:\n  livenessProbe:\n    <<: *base\n    exec: {command: [x]}\n", []string{
			whole + "base: must have no YAML anchors: found &base " + refusedAnchor}},
		{"an anchor on a key", "? &k app\n: {}\n", []string{
			whole + "must have no YAML anchors: found &k " + refusedAnchor}},
		{"a long anchor name", "app: &" + strings.Repeat("n", 100) + " {}\n", []string{
			whole + `app: must have no YAML anchors: found &"` + strings.Repeat("n", 32) + `"... ` + refusedAnchor}},
		{"over the size", tooLong, []string{
			whole + fmt.Sprintf("must have at most %d bytes, has %d", MaxAnnotationBytes, len(tooLong))}},
		{"over the size as JSON", escapes, []string{
			whole + fmt.Sprintf("must have at most %d bytes once converted to JSON, has %d", MaxAnnotationJSONBytes, escapesJSON)}},
		{"over the YAML nodes", execArgs(MaxYAMLNodes), []string{
			whole + fmt.Sprintf("must have at most %d YAML nodes (scalars, sequences and mappings, keys included)", MaxYAMLNodes)}},
		{"over the arguments", execArgs(MaxExecArgs + 1), []string{
			fmt.Sprintf(`container "app" livenessProbe: exec.command: Too many: %d: must have at most %d arguments`, MaxExecArgs+1, MaxExecArgs)}},
		{"over the command's bytes", annotationOf("app", "livenessProbe", `{"exec": {"command": ["sh", "-c", "`+longArg+`"]}}`), []string{
			fmt.Sprintf(`container "app" livenessProbe: exec.command: Too long: must have at most %d bytes in all its arguments, has %d`, MaxExecBytes, MaxExecBytes+4)}},
		{"at every bound", annotationOf("app", "livenessProbe", `{"exec": {"command": ["`+longArg[:MaxExecBytes-MaxExecArgs+1]+`"`+strings.Repeat(`, "a"`, MaxExecArgs-1)+`]}}`), nil},
		{"& and * in scalars", "app: {livenessProbe: {exec: {command: [sh, -c, 'a && b *c', \"&d\", e&f, g*]}}}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, src := range []ProbeSource{ProbeSourceAnnotation, ProbeSourceBoth} {
				_, problems := DeclaredProbes(testPod(tc.annotation), src)
				if got := problemStrings(problems); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: problems\n%q\nwant\n%q", src, got, tc.want)
				}
			}
		})
	}
}

// TestMalformedAnnotationTextIsCapped: the YAML decoder lists every
// duplicate key; the InvalidProbe text and log line keep the first 2 KiB.
func TestMalformedAnnotationTextIsCapped(t *testing.T) {
	_, problems := DeclaredProbes(testPod("{"+strings.Repeat("a: 1, ", 1000)+"}"), ProbeSourceAnnotation)
	if len(problems) != 1 || !strings.Contains(problems[0].Detail, `key "a" already set in map`) ||
		!strings.HasSuffix(problems[0].Detail, " ...") || len(problems[0].Detail) != maxWholeDetailBytes+len(" ...") {
		t.Errorf("problems %q; want one of %d bytes and \" ...\"", problemStrings(problems), maxWholeDetailBytes)
	}
}

// TestAnnotationBoundsEveryPath: the daemon, the webhook (validation,
// approval, adoption) and the converter read the annotation through the
// same bounded parse, and each refuses what is over a bound with the
// daemon's text.
func TestAnnotationBoundsEveryPath(t *testing.T) {
	bomb := aliasBomb(1<<10, 8<<10)
	pod := testPod(bomb)
	_, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
	if len(problems) != 1 || !strings.Contains(problems[0].String(), "must have no YAML anchors") {
		t.Fatalf("DeclaredProbes: %q", problemStrings(problems))
	}
	want := problems[0].String()
	if _, err := ApproveReach(pod); err == nil || err.Error() != want {
		t.Errorf("ApproveReach: %v; want %q", err, want)
	}
	if _, err := UnapprovedReachEdits(testPod("-"), pod); err == nil || err.Error() != want {
		t.Errorf("UnapprovedReachEdits: %v; want %q", err, want)
	}
	adopted := pod.DeepCopy()
	adopted.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
	if _, err := Adopt(&adopted.ObjectMeta, &adopted.Spec); err == nil || err.Error() != want {
		t.Errorf("Adopt: %v; want %q", err, want)
	}
	// An approved pod whose annotation a patch-only editor turned into a
	// bomb: the daemon refuses it as malformed, and runs nothing from it.
	created := annotationOf("app", "livenessProbe", `{"exec": {"command": ["true"]}}`)
	edited := withApproval(testPod(bomb), approve(t, created))
	declared, problems := DeclaredProbes(edited, ProbeSourceAnnotation)
	kept, problems := CheckReach(edited, declared, problems, true)
	if len(kept) != 0 || len(problems) != 1 || problems[0].String() != want {
		t.Errorf("the daemon: kept %v, problems %q", probeKeysOf(kept), problemStrings(problems))
	}
}

// parseBudget bounds what reading one annotation may allocate in all:
// 48 times the API server's 256 KiB limit for a pod's annotations. The
// costliest text under MaxAnnotationBytes is YAML of one-byte nodes, which
// yaml.v3 reads at about 240 bytes a byte (8 MB) before MaxYAMLNodes
// refuses it.
const parseBudget = 12 << 20

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc:
// every allocation, freed or not), on this goroutine alone as long as no
// other runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAnnotationParseMemoryBound: whatever a pod's author or editor
// writes into the annotation, up to the API server's 256 KiB, reading it
// allocates at most parseBudget on each path that reads it. Unbounded, the
// issue's 32 KiB alias bomb made DeclaredProbes allocate 417 MiB and
// ApproveReach 481 MiB.
func TestAnnotationParseMemoryBound(t *testing.T) {
	const apiLimit = 256 << 10
	for _, tc := range []struct {
		name, annotation, refusal string
	}{
		{"alias bomb, 256 KiB", aliasBomb(1<<10, apiLimit), "must have at most"},
		{"alias bomb, the issue's 32 KiB", aliasBomb(16<<10, MaxAnnotationBytes), "must have no YAML anchors"},
		{"plain YAML, 256 KiB", execArgs(apiLimit / 2), "must have at most"},
		{"plain JSON, 256 KiB", annotationOf("app", "livenessProbe", `{"exec": {"command": ["`+strings.Repeat("x", apiLimit)+`"]}}`), "must have at most"},
		{"one-byte YAML nodes, just under the size", "{" + strings.Repeat("a,", MaxAnnotationBytes/2-2) + "a}", "must have at most 4096 YAML nodes"},
		{"the most YAML nodes, just under the size", execArgs(MaxYAMLNodes - 8), ""}, // reach is read of invalid probes too
		{"valid, at the bounds", atTheBounds(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.annotation)
			old := withApproval(testPod(annotationOf("app", "livenessProbe", `{"exec": {"command": ["true"]}}`)), "v1")
			paths := []struct {
				name string
				run  func() string // the refusal's text
			}{
				{"the daemon: DeclaredProbes and CheckReach", func() string {
					declared, problems := DeclaredProbes(pod, ProbeSourceAnnotation)
					_, problems = CheckReach(pod, declared, problems, true)
					return strings.Join(problemStrings(problems), "; ")
				}},
				{"the webhook's approval: ApproveReach", func() string {
					_, err := ApproveReach(pod)
					return fmt.Sprint(err)
				}},
				{"the webhook's approval of an update: UnapprovedReachEdits", func() string {
					_, err := UnapprovedReachEdits(old, pod)
					return fmt.Sprint(err)
				}},
				{"adoption (webhook, probed convert): Adopt", func() string {
					p := pod.DeepCopy()
					_, err := Adopt(&p.ObjectMeta, &p.Spec)
					return fmt.Sprint(err)
				}},
			}
			for _, p := range paths {
				var refusal string
				n := allocated(func() { refusal = p.run() })
				if n > parseBudget {
					t.Errorf("%s: allocated %d MiB for %d KiB of annotation; want at most %d MiB",
						p.name, n>>20, len(tc.annotation)>>10, parseBudget>>20)
				}
				if !strings.Contains(refusal, tc.refusal) {
					t.Errorf("%s: %q; want a refusal naming %q", p.name, refusal, tc.refusal)
				}
				t.Logf("%s: %d KiB", p.name, n>>10)
			}
		})
	}
}

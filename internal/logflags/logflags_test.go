package logflags

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/probed-dev/probed/internal/flagschema"
)

// Every logging flag offered works when set: component-base validates it
// without a feature gate, as the binaries run. A value for each, not the
// default one; --vmodule works with the text format only.
func TestEveryOfferedFlagWorks(t *testing.T) {
	samples := map[string]string{"v": "4", "vmodule": "worker=5,manager=3", "logging-format": "text", "log-flush-frequency": "2s"}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	c := Add(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	for _, n := range names {
		if _, ok := samples[n]; !ok {
			t.Errorf("--%s is offered, and this test has no value for it: add one", n)
		}
	}
	var args []string
	for n, v := range samples {
		if !slices.Contains(names, n) {
			t.Errorf("--%s is not offered", n)
		}
		args = append(args, "--"+n+"="+v)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if errs := logsapi.Validate(c, nil, nil); len(errs) > 0 {
		t.Errorf("%v: %v", args, errs.ToAggregate())
	}
	if c.Verbosity != 4 || len(c.VModule) != 2 {
		t.Errorf("parsed into %+v", c)
	}
	for _, format := range Formats {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		c := Add(fs)
		if err := fs.Parse([]string{"--logging-format=" + format, "--v=3"}); err != nil {
			t.Fatal(err)
		}
		if errs := logsapi.Validate(c, nil, nil); len(errs) > 0 {
			t.Errorf("--logging-format=%s: %v", format, errs.ToAggregate())
		}
	}
	if err := fs.Parse([]string{"--logging-format=xml"}); err == nil {
		t.Error("--logging-format=xml accepted")
	}
}

// --vmodule with --logging-format=json stops the binary: the chart's schema
// refuses the pair (see VModuleNeedsText).
func TestVModuleNeedsText(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	c := Add(fs)
	if err := fs.Parse([]string{"--logging-format=json", "--vmodule=worker=5"}); err != nil {
		t.Fatal(err)
	}
	if errs := logsapi.Validate(c, nil, nil); len(errs) == 0 {
		t.Error("--vmodule with json validates; drop VModuleNeedsText")
	}
}

// What is left out would stop the binary: component-base's [Alpha] options
// each fail validation without the LoggingAlphaOptions gate.
func TestAlphaFlagsLeftOutFail(t *testing.T) {
	all := flag.NewFlagSet("all", flag.ContinueOnError)
	all.SetOutput(io.Discard)
	logsapi.AddGoFlags(logsapi.NewLoggingConfiguration(), all)
	offered := pflag.NewFlagSet("x", pflag.ContinueOnError)
	Add(offered)
	n := 0
	all.VisitAll(func(f *flag.Flag) {
		if offered.Lookup(f.Name) != nil {
			return
		}
		n++
		c := logsapi.NewLoggingConfiguration()
		fs := flag.NewFlagSet("one", flag.ContinueOnError)
		logsapi.AddGoFlags(c, fs)
		v := "true"
		if strings.Contains(f.Name, "buffer-size") {
			v = "1Ki"
		}
		if err := fs.Parse([]string{"--" + f.Name + "=" + v}); err != nil {
			t.Fatal(err)
		}
		errs := logsapi.Validate(c, nil, nil)
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "LoggingAlphaOptions") {
			t.Errorf("--%s=%s left out, but it validates: %v", f.Name, v, errs)
		}
	})
	if n == 0 {
		t.Error("nothing left out")
	}
}

// Each offered flag has a schema.
func TestSchema(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	Add(fs)
	props, err := flagschema.Properties(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(props) != 4 {
		t.Errorf("%d flags described: %v", len(props), props)
	}
}

// -v is klog's verbosity as in every Kubernetes component: -v=4, -v 4 and
// --v=4 set the same level.
func TestVerbositySpellings(t *testing.T) {
	for _, args := range [][]string{{"-v=4"}, {"-v", "4"}, {"--v=4"}, {"--v", "4"}, {"-v4"}} {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		c := Add(fs)
		if err := fs.Parse(args); err != nil || c.Verbosity != 4 || fs.NArg() != 0 {
			t.Errorf("%q: verbosity %d, error %v, left %q; want 4", args, c.Verbosity, err, fs.Args())
		}
	}
}

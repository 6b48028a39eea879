// Package daemon is what probed's two daemons, probed and probed-webhook,
// share around their own wiring: the main (the command line as cliflags
// parses it, --version, the logging flags, the options' own checks, and a
// run that ends on SIGTERM or an interrupt) and the API client
// configuration.
package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/logflags"
	"github.com/probed-dev/probed/pkg/version"
)

// Command is one daemon, with options O.
type Command[O any] struct {
	// Name is the binary's name, in --version and in errors.
	Name string
	// Usage is the header --help prints above the flags.
	Usage string
	// FlagSet is the command line, filling o (cliflags.NewFlagSet's shape).
	FlagSet func(o *O) (*pflag.FlagSet, *logsapi.LoggingConfiguration, *bool)
	// Validate checks the options once parsed.
	Validate func(o *O) error
	// Run runs the daemon until ctx ends.
	Run func(ctx context.Context, o *O) error
}

// Main runs the daemon with args (os.Args[1:]) and returns its exit code:
// 0 after --help, --version or a run that returned nil; 2 for a bad
// command line or bad options; 1 when the run failed, logged.
func (c Command[O]) Main(args []string) int {
	o := new(O)
	fs, logging, showVersion := c.FlagSet(o)
	if err := cliflags.Parse(fs, args); err != nil {
		return cliflags.Exit(err, fs, cliflags.Usage(fs, c.Usage), os.Stdout, os.Stderr)
	}
	if *showVersion {
		fmt.Println(version.String(c.Name))
		return 0
	}
	if err := logflags.Apply(logging); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, err)
		return 2
	}
	if err := c.Validate(o); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := c.Run(ctx, o)
	if err != nil {
		klog.ErrorS(err, c.Name+" failed")
	}
	klog.Flush()
	if err != nil {
		return 1
	}
	return 0
}

// RESTConfig is the API client configuration of the daemon called name:
// from the kubeconfig file, or in-cluster when it is empty, with the
// daemon's rate limit and a User-Agent of name/version.
func RESTConfig(name, kubeconfig string, qps float64, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the API client config: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.UserAgent = name + "/" + version.Version
	return cfg, nil
}

// Command demo-node starts a single-node cluster with probed on it and
// exits, leaving it running for `make demo`; `demo-node down` stops it.
//
//	demo-node up   --run-dir .cache/demo [--image-dir .cache/images] [--metrics-port 9809] [--probed-arg=--flag=value ...]
//	demo-node down --run-dir .cache/demo
//	demo-node fetch URL [TOKEN_FILE]   (prints the body, like curl -fsS; https
//	                                    accepts probed's self-signed certificate)
//
// up starts the node (test/harness/node, detached), imports every *.tar in
// the image dir (the test images, probed's, and any the sample workloads
// built), deploys probed from deploy/, writes a token that may read
// probed's /metrics and /debug/probes (RUN_DIR/probed-scraper.token, a
// day long), and prints the kubeconfig path, probed's URL and the token file. If
// anything fails, it stops what it started and keeps the logs in the run dir
// (down removes it). down stops a node started by up and removes the run dir.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/probed-dev/probed/test/harness/node"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if (len(os.Args) == 3 || len(os.Args) == 4) && os.Args[1] == "fetch" {
		// curl -fsS, for machines without curl.
		tokenFile := ""
		if len(os.Args) == 4 {
			tokenFile = os.Args[3]
		}
		if err := fetch(os.Args[2], tokenFile); err != nil {
			fmt.Fprintf(os.Stderr, "demo-node fetch: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: demo-node up|down --run-dir DIR [flags], or demo-node fetch URL [TOKEN_FILE]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet("demo-node "+cmd, flag.ExitOnError)
	runDir := fs.String("run-dir", ".cache/demo", "the node's run dir (kept while it runs)")
	imageDir := fs.String("image-dir", ".cache/images", "image archives (*.tar) to import")
	image := fs.String("probed-image", node.ProbedImage, "probed's image")
	metricsPort := fs.Int("metrics-port", node.DefaultProbedMetricsPort, "probed's metrics port on 127.0.0.1")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on up")
	var probedArgs multiFlag
	fs.Var(&probedArgs, "probed-arg", "an extra argument for probed (repeatable)")
	_ = fs.Parse(os.Args[2:])

	var err error
	if cmd == "up" {
		err = up(*runDir, *imageDir, *image, *metricsPort, *timeout, probedArgs)
	} else {
		err = down(*runDir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo-node %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("   [%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func up(runDir, imageDir, image string, metricsPort int, timeout time.Duration, probedArgs []string) (err error) {
	// Ctrl-C ends the start (and Start then stops what it started), but does
	// not reach the node's processes: they have their own sessions.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	defer cancelTimeout()

	defaults := []string{"busybox", "busybox-stopsignal", "pause"}
	n, err := node.Start(ctx, node.Options{
		RunDir:            runDir,
		Detach:            true,
		ImageDir:          imageDir,
		Images:            defaults,
		ProbedMetricsPort: metricsPort,
		Logf:              logf,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			logf("stopping the node after the error; logs stay in %s", n.RunDir)
			_ = n.Stop()
		}
	}()

	archives, _ := filepath.Glob(filepath.Join(imageDir, "*.tar"))
	for _, a := range archives {
		if slices.Contains(defaults, strings.TrimSuffix(filepath.Base(a), ".tar")) {
			continue // imported by Start
		}
		t := time.Now()
		if err := n.ImportImage(ctx, a); err != nil {
			return err
		}
		logf("imported %s in %v", filepath.Base(a), time.Since(t).Round(time.Millisecond))
	}
	if err := n.DeployProbed(ctx, image, probedArgs...); err != nil {
		return err
	}
	pod, err := n.ProbedPodName(ctx)
	if err != nil {
		return err
	}
	logf("probed pod %s/%s is Ready", n.ProbedNamespace(), pod)
	// /metrics and /debug/probes need a token the API server authorizes:
	// service account probed-harness-scraper, bound to deploy/'s roles.
	tokenFile := filepath.Join(n.RunDir, "probed-scraper.token")
	if err := n.WriteProbedToken(ctx, tokenFile, 24*time.Hour); err != nil {
		return err
	}
	fmt.Printf("KUBECONFIG=%s\nPROBED_URL=%s\nPROBED_TOKEN_FILE=%s\nPOD_SUBNET=%s\n", n.KubeconfigPath, n.ProbedMetricsURL(), tokenFile, n.PodSubnet)
	return nil
}

func down(runDir string) error {
	if _, err := os.Stat(filepath.Join(runDir, "node.json")); os.IsNotExist(err) {
		if _, err := os.Stat(runDir); err == nil {
			fmt.Printf("no node in %s; removing it\n", runDir)
			return node.RemoveRunDir(runDir)
		}
		fmt.Printf("no node in %s\n", runDir)
		return nil
	}
	t := time.Now()
	if err := node.StopRunDir(runDir); err != nil {
		return err
	}
	if err := node.RemoveRunDir(runDir); err != nil {
		return err
	}
	fmt.Printf("node in %s stopped and removed in %v\n", runDir, time.Since(t).Round(time.Millisecond))
	return nil
}

func fetch(url, tokenFile string) error {
	token := ""
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
	}
	body, err := node.FetchProbed(context.Background(), url, token)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(body)
	return err
}

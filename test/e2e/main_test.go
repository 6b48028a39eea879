//go:build e2e

// Package e2e is probed's end-to-end tier. TestMain starts one real node on
// loopback (test/harness/node: etcd, kube-apiserver, controller-manager,
// scheduler, containerd with a CNI bridge and a kubelet), imports the locally
// built images, and deploys probed from deploy/ as the DaemonSet. The tests
// then re-run the Kubernetes "Probing container" conformance scenarios
// (test/e2e/common/node/container_probe.go) with the probes declared in the
// probed.io/probes annotation instead of the pod spec: the kubelet runs no
// probe, probed runs them all, gates readiness through probed.io/ready, and
// stops containers whose liveness or startup probe fails; the kubelet then
// restarts them, and its containerStatuses count the restarts.
//
//	go test -tags e2e -v -timeout 30m ./test/e2e/
//
// Environment:
//
//	E2E_OBSERVE            how long "never restarted" scenarios watch (default 4m, as upstream)
//	E2E_OBSERVE_READINESS  how long "never ready" scenarios watch (default 1m, as upstream)
//	E2E_RUN_DIR            the node's run dir, kept afterwards (default: a temporary one, removed)
//	E2E_PROBED_ARGS        more flags for probed's DaemonSet, space-separated
//	E2E_SKIP_IMAGE_BUILD   set to skip running the image build scripts
//	E2E_START_SLOTS        how many scenario pods may be starting at once (default 6)
//	E2E_START_PRESSURE     admit a pod to start only while CPU pressure avg10 is below this percent (default 50)
//	E2E_POD_SOURCE_MEASURE run TestPodSourceLatency, a measurement, with this many pods per pod source (e.g. 10)
//
// probed reads its pods from the kubelet's Pods API on a 1.37+ node
// (deploy/pod-source-kubelet: --pod-source=kubelet, the socket mounted, no
// get, list or watch on pods in its ClusterRole), so every test runs it that
// way; on an older node (the compat tier) it runs with --pod-source=auto and
// the socket's directory mounted (testdata/pod-source-auto), and must choose
// the API server. TestMain checks probed chose as expected.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/node"
)

const (
	// testNS holds every scenario's pod; events are told apart by pod UID.
	testNS = "probing"
	// probedImage is what hack/build-probed-image.sh builds.
	probedImage = "probed:dev"
)

var (
	nd       *node.Node
	client   kubernetes.Interface
	repoRoot string

	// Upstream's windows: 4 minutes for "never restarted", 1 for "never ready".
	// They cost no wall time: the restart-count scenario takes as long.
	observeLiveness  = envDuration("E2E_OBSERVE", 4*time.Minute)
	observeReadiness = envDuration("E2E_OBSERVE_READINESS", time.Minute)

	// probedArgs are added to the DaemonSet's. The scenarios check the
	// kubelet's semantics, under which every liveness or startup failure
	// restarts its container at once; dozens of them fail within the same
	// minute here, which probed's node-wide restart budget (default 10 per
	// minute) would rightly defer, so the budget is off. --pdb-restarts is
	// on, with deploy/pdb-restarts' grants: pods no PDB selects (all but
	// TestPDBRestartsOnNode's) must behave exactly as without it.
	probedArgs = []string{"-v=3", "--liveness-restart-budget=0", "--pdb-restarts"}

	// images are imported into the node's containerd; all are built offline.
	images = []string{"busybox.tar", "probe-target.tar", "probed.tar"}
)

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", name, v, err))
		}
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			panic(fmt.Sprintf("%s=%q: want a whole number of at least 1", name, v))
		}
		return n
	}
	return def
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func run(m *testing.M) (code int) {
	flag.Parse()
	// Every scenario runs in parallel with the others; the default
	// -test.parallel (GOMAXPROCS, 2 here) would serialize them.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "100")
	}
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "e2e: skipped in -short mode")
		return 0
	}
	began := time.Now()
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		logf("%v", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	if os.Getenv("E2E_SKIP_IMAGE_BUILD") == "" {
		for _, script := range []string{"hack/build-images.sh", "hack/build-workload-images.sh", "hack/build-probed-image.sh"} {
			t0 := time.Now()
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, script))
			cmd.Dir = repoRoot
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				logf("%s: %v", script, err)
				return 1
			}
			logf("%s done in %v", script, time.Since(t0).Round(time.Millisecond))
		}
	}

	// An empty run dir makes the harness use a temporary one, removed on Stop;
	// E2E_RUN_DIR keeps everything (logs included) for a post-mortem.
	t0 := time.Now()
	// probed runs with deploy/probe-tls (--pod-volumes-dir, the kubelet's
	// pods directory mounted), for TestVerifiedTLS; the harness points both
	// at this node's kubelet. Probes without probed.io/tls, all the others,
	// must behave exactly as without it. And with deploy/pod-netns
	// (--pod-network-probes, CAP_SYS_ADMIN, the runtime's namespaces
	// mounted), for TestProbeFromInsidePod. The pod source's component is
	// added below, by the kubelet's version.
	nd, err = node.Start(ctx, node.Options{RunDir: os.Getenv("E2E_RUN_DIR"), DeployComponents: []string{"probe-tls", "pod-netns"}})
	if err != nil {
		logf("starting the node: %v", err)
		return 1
	}
	logf("node %q up in %v (run dir %s)", nd.Name, time.Since(t0).Round(time.Millisecond), nd.RunDir)
	stopped := sync.OnceValue(func() error {
		t0 := time.Now()
		err := nd.Stop()
		logf("node stopped in %v (err=%v)", time.Since(t0).Round(time.Millisecond), err)
		return err
	})
	defer func() {
		if err := stopped(); err != nil && code == 0 {
			code = 1
		}
	}()
	// An interrupted run must not leave a node behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := <-sigs; ok {
			logf("%v: stopping the node", s)
			_ = stopped()
			os.Exit(130)
		}
	}()

	t0 = time.Now()
	for _, img := range images {
		if err := nd.ImportImage(ctx, filepath.Join(repoRoot, ".cache/images", img)); err != nil {
			logf("importing %s: %v", img, err)
			return 1
		}
	}
	logf("images imported in %v", time.Since(t0).Round(time.Millisecond))

	// The scenarios poll the API server from dozens of goroutines; client-go's
	// default 5 QPS would make the tests, not probed, the slow part.
	cfg := nd.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		logf("%v", err)
		return 1
	}

	t0 = time.Now()
	if err := applyPDBRestartsGrants(ctx); err != nil {
		logf("%v", err)
		return 1
	}
	kubeletVersion, err := pickPodSource(ctx)
	if err != nil {
		logf("%v", err)
		return 1
	}
	probedArgs = append(probedArgs, strings.Fields(os.Getenv("E2E_PROBED_ARGS"))...)
	if err := nd.DeployProbed(ctx, probedImage, probedArgs...); err != nil {
		logf("deploying probed: %v", err)
		dumpProbedLog(ctx, 100)
		return 1
	}
	logf("probed deployed (components %q, extra args %q) and Ready in %v", nd.DeployComponents(), probedArgs, time.Since(t0).Round(time.Millisecond))
	if err := checkPodSource(ctx, podSource); err != nil {
		logf("kubelet %s: %v", kubeletVersion, err)
		dumpProbedLog(ctx, 60)
		return 1
	}
	logf("probed's pod source is the %s, as expected of kubelet %s", podSource, kubeletVersion)

	if err := createNamespace(ctx, testNS); err != nil {
		logf("namespace %s: %v", testNS, err)
		return 1
	}
	logf("setup done in %v; scenarios observe %v (liveness) and %v (readiness)",
		time.Since(began).Round(time.Millisecond), observeLiveness, observeReadiness)

	t0 = time.Now()
	code = m.Run()
	logf("scenarios done in %v", time.Since(t0).Round(time.Millisecond))
	printSummary()
	if code != 0 {
		dumpProbedLog(ctx, 60)
	}
	logf("whole tier: %v", time.Since(began).Round(time.Millisecond))
	return code
}

// createNamespace creates ns and waits for its default service account, which
// the controller-manager adds and pod admission requires.
func createNamespace(ctx context.Context, ns string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// result is one scenario's outcome for the summary.
type result struct {
	name     string
	outcome  string
	duration time.Duration
	notes    []string
}

var (
	resultsMu sync.Mutex
	results   []result
)

func record(r result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

func printSummary() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	sort.Slice(results, func(i, j int) bool { return results[i].name < results[j].name })
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-62s %-5s %9s  %s\n", "SCENARIO", "", "DURATION", "NOTES")
	for _, r := range results {
		fmt.Fprintf(&b, "%-62s %-5s %8.1fs  %s\n", r.name, r.outcome, r.duration.Seconds(), strings.Join(r.notes, "; "))
	}
	fmt.Fprint(os.Stdout, b.String())
}

//go:build soak

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// soakPod is the test's model of one pod: where its targets are and what
// their health is. Each pod has one container, "app", with three probes; the
// kind picks which of HTTP, TCP and gRPC serves readiness, liveness and startup:
//
//	kind 0: readiness HTTP /ready/<pod>, liveness TCP,  startup gRPC startup-<pod>
//	kind 1: readiness gRPC ready-<pod>,  liveness HTTP, startup TCP
//	kind 2: readiness TCP (a flip port), liveness gRPC, startup HTTP /startup/<pod>
//
// Liveness targets are always healthy: with --runtime-type=none a liveness
// failure has no runtime to stop a container, so it would only count errors.
type soakPod struct {
	Name  string
	UID   types.UID
	Site  *site
	Kind  int
	Flip  *flipPort // kind 2's readiness port
	ready bool      // kinds 0 and 1: the readiness target's health
}

const (
	readyPeriod   = 5
	livePeriod    = 10
	startupPeriod = 2
)

func (p *soakPod) annotation() string {
	s := p.Site
	httpGet := func(path string) map[string]any { return map[string]any{"path": path, "port": s.HTTPPort} }
	tcp := func(port int) map[string]any { return map[string]any{"port": port} }
	grpc := func(svc string) map[string]any { return map[string]any{"port": s.GRPCPort, "service": svc} }
	probe := func(kind string, handler map[string]any, period, failures int) map[string]any {
		return map[string]any{kind: handler, "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": 2}
	}
	var r, l, st map[string]any
	switch p.Kind {
	case 0:
		r = probe("httpGet", httpGet("/ready/"+p.Name), readyPeriod, 2)
		l = probe("tcpSocket", tcp(s.LivePort), livePeriod, 3)
		st = probe("grpc", grpc("startup-"+p.Name), startupPeriod, 60)
	case 1:
		r = probe("grpc", grpc("ready-"+p.Name), readyPeriod, 2)
		l = probe("httpGet", httpGet("/healthz"), livePeriod, 3)
		st = probe("tcpSocket", tcp(s.LivePort), startupPeriod, 60)
	default:
		r = probe("tcpSocket", tcp(p.Flip.Port), readyPeriod, 2)
		l = probe("grpc", grpc(""), livePeriod, 3)
		st = probe("httpGet", httpGet("/startup/"+p.Name), startupPeriod, 60)
	}
	b, _ := json.Marshal(map[string]any{"app": map[string]any{"readinessProbe": r, "livenessProbe": l, "startupProbe": st}})
	return string(b)
}

func (p *soakPod) setReady(v bool) {
	p.ready = v
	switch p.Kind {
	case 0:
		p.Site.paths.Store("/ready/"+p.Name, v)
	case 1:
		p.Site.services.Store("ready-"+p.Name, v)
	}
}

func (p *soakPod) setStarted(v bool) {
	switch p.Kind {
	case 0:
		p.Site.services.Store("startup-"+p.Name, v)
	case 2:
		p.Site.paths.Store("/startup/"+p.Name, v)
	}
}

func (p *soakPod) forget() {
	p.Site.paths.Delete("/ready/" + p.Name)
	p.Site.paths.Delete("/startup/" + p.Name)
	p.Site.services.Delete("ready-" + p.Name)
	p.Site.services.Delete("startup-" + p.Name)
}

// expectReady is the readiness the pod's target currently calls for.
func (p *soakPod) expectReady() bool {
	if p.Kind == 2 {
		return p.Flip.Up()
	}
	return p.ready
}

// cluster is the test playing the kubelet of one node.
type cluster struct {
	ns, node string
	sites    []*site
	rng      *rand.Rand
	seq      int
	live     []*soakPod // oldest first
	starting []*soakPod // startup targets not yet healthy
	created  int
	deleted  int
	flips    int
}

// add creates n pods in parallel, each then marked Running as the kubelet would.
func (c *cluster) add(ctx context.Context, n int) error {
	batch := make([]*soakPod, n)
	for i := range batch {
		c.seq++
		p := &soakPod{Name: fmt.Sprintf("p%06d", c.seq), Kind: c.seq % 3, Site: c.sites[c.rng.IntN(len(c.sites))]}
		if p.Kind == 2 {
			p.Flip = p.Site.Flips[c.rng.IntN(len(p.Site.Flips))]
		}
		p.setReady(c.rng.Float64() < 0.8)
		// Half the pods start slow: startup fails until the next wave.
		slow := p.Kind != 1 && c.rng.IntN(2) == 0
		p.setStarted(!slow)
		if slow {
			c.starting = append(c.starting, p)
		}
		batch[i] = p
	}
	err := parallel(ctx, batch, func(ctx context.Context, p *soakPod) error { return c.createPod(ctx, p) })
	c.live = append(c.live, batch...)
	c.created += n
	return err
}

func (c *cluster) createPod(ctx context.Context, sp *soakPod) error {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.Name, Namespace: c.ns,
			Labels:      map[string]string{"app": "soak"},
			Annotations: map[string]string{"probed.io/probes": sp.annotation()},
		},
		Spec: v1.PodSpec{
			NodeName:       c.node,
			Containers:     []v1.Container{{Name: "app", Image: "busybox"}},
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: "probed.io/ready"}},
		},
	}
	created, err := client.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	sp.UID = created.UID
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		setRunning(created, sp.Site.IP)
		_, err := client.CoreV1().Pods(c.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := client.CoreV1().Pods(c.ns).Get(ctx, sp.Name, metav1.GetOptions{}); gerr == nil {
				created = fresh
			}
		}
		return err
	})
}

// setRunning is the status a kubelet writes once the container runs.
func setRunning(p *v1.Pod, ip string) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	t := true
	p.Status.Phase = v1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []v1.PodIP{{IP: ip}}
	p.Status.HostIP = "127.0.0.1"
	p.Status.StartTime = &now
	p.Status.ContainerStatuses = []v1.ContainerStatus{{
		Name: "app", Image: "busybox", ImageID: "sha256:0", Started: &t, Ready: true,
		ContainerID: fmt.Sprintf("containerd://%s-app-0", p.UID),
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
	}}
}

// removeOldest deletes the n oldest pods (grace 0: no kubelet is there to
// finish a graceful deletion) and then drops their targets.
func (c *cluster) removeOldest(ctx context.Context, n int) error {
	n = min(n, len(c.live))
	batch := c.live[:n]
	c.live = append([]*soakPod(nil), c.live[n:]...)
	err := parallel(ctx, batch, func(ctx context.Context, p *soakPod) error {
		err := client.CoreV1().Pods(c.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		p.forget()
		return err
	})
	c.deleted += n
	return err
}

// flip toggles the readiness targets of n random live pods, and one flip port.
func (c *cluster) flip(n int) error {
	for range n {
		p := c.live[c.rng.IntN(len(c.live))]
		if p.Kind == 2 {
			continue
		}
		p.setReady(!p.ready)
		c.flips++
	}
	s := c.sites[c.rng.IntN(len(c.sites))]
	f := s.Flips[c.rng.IntN(len(s.Flips))]
	c.flips++
	if f.Up() {
		f.close()
		return nil
	}
	return f.open()
}

// releaseStarting makes every pending startup target healthy.
func (c *cluster) releaseStarting() {
	for _, p := range c.starting {
		p.setStarted(true)
	}
	c.starting = nil
}

// mismatch lists live pods whose conditions do not match their targets.
func (c *cluster) mismatches(ctx context.Context) ([]string, error) {
	list, err := client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=soak"})
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*v1.Pod, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var bad []string
	for _, sp := range c.live {
		pod := byName[sp.Name]
		if pod == nil {
			bad = append(bad, sp.Name+": missing")
			continue
		}
		want := map[string]bool{
			"started.probed.io/app": true,
			"ready.probed.io/app":   sp.expectReady(),
			"probed.io/ready":       sp.expectReady(),
		}
		for typ, w := range want {
			got := condStatus(pod, typ)
			if got != fmt.Sprint(w) {
				bad = append(bad, fmt.Sprintf("%s (kind %d): %s=%s, want %v", sp.Name, sp.Kind, typ, got, w))
			}
		}
	}
	if len(list.Items) != len(c.live) {
		bad = append(bad, fmt.Sprintf("%d pods listed, %d live", len(list.Items), len(c.live)))
	}
	return bad, nil
}

func condStatus(p *v1.Pod, typ string) string {
	for _, c := range p.Status.Conditions {
		if string(c.Type) == typ {
			switch c.Status {
			case v1.ConditionTrue:
				return "true"
			case v1.ConditionFalse:
				return "false"
			}
			return string(c.Status)
		}
	}
	return "absent"
}

// parallel runs fn over items with a few workers; it returns the first error.
func parallel(ctx context.Context, items []*soakPod, fn func(context.Context, *soakPod) error) error {
	const workers = 16
	ch := make(chan *soakPod)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range ch {
				if err := fn(ctx, p); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range items {
		ch <- p
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d failed, first: %w", len(errs), len(items), errs[0])
	}
	return nil
}

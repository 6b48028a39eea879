package kill

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Event reasons of deferred restarts (Warning events on the container).
const (
	// ReasonRestartsPaused: the workload guard paused a liveness restart.
	ReasonRestartsPaused = "RestartsPaused"
	// ReasonRestartBudgetExceeded: the node's restart budget deferred a restart.
	ReasonRestartBudgetExceeded = "RestartBudgetExceeded"
	// ReasonDisruptionBudget: a PodDisruptionBudget deferred a restart
	// (--pdb-restarts).
	ReasonDisruptionBudget = "RestartDisruptionBudget"
	// ReasonDisruptionBudgetUnchecked: the PodDisruptionBudgets could not
	// be checked, or a deferral reached --pdb-restart-max-deferral; the
	// restart went to the node-local guards.
	ReasonDisruptionBudgetUnchecked = "RestartDisruptionBudgetUnchecked"
)

// episodeGap: a deferral with no attempt for this long is over; the next one
// is reported (event and metric) afresh.
const episodeGap = 10 * time.Minute

// Guard is the Killer in front of RuntimeKiller: it applies the workload
// guard (liveness kills only) and then the node budget with its
// per-namespace shares (liveness and startup kills) before handing a kill
// to Inner. Every deferral is a *DeferredError, reported once
// per container instance and reason with a Warning event and
// probed_restarts_deferred_total.
type Guard struct {
	// Inner performs allowed kills; required.
	Inner Killer
	// Budget is the node's restart budget; nil is unlimited.
	Budget *Budget
	// Workloads is the workload guard; nil guards nothing.
	Workloads *Workloads
	// Disruptions is the PodDisruptionBudget gate; nil: PDBs are not
	// consulted (as the kubelet).
	Disruptions *DisruptionBudgets
	// Recorder receives the deferral events; nil emits none.
	Recorder Recorder
	// Metrics may be nil.
	Metrics *Metrics
	// Clock defaults to the real clock.
	Clock clock.PassiveClock

	mu       sync.Mutex
	episodes map[episodeKey]time.Time // last attempt of each ongoing deferral
	// spent holds the containers whose kill took a token and then failed,
	// with their last attempt: the worker's retries of that kill decision
	// take none.
	spent map[string]time.Time
}

type episodeKey struct{ containerID, reason string }

var _ Killer = (*Guard)(nil)

// Kill implements Killer.
func (k *Guard) Kill(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, probeType probespec.ProbeType, spec *v1.Probe) error {
	if probeType == probespec.Liveness && k.Workloads != nil {
		if d := k.Workloads.Failing(pod, container.Name); d.Paused {
			return k.deferKill(pod, container.Name, containerID, DeferWorkloadGuard, ReasonRestartsPaused, d.Message(), true)
		}
	}
	if !k.retrying(containerID) {
		if v := k.Budget.Take(pod.Namespace); !v.OK {
			msg := budgetMessage(k.Budget, v, pod.Namespace, container.Name, probeType)
			return k.deferKill(pod, container.Name, containerID, DeferBudget, ReasonRestartBudgetExceeded, msg, false)
		}
	}
	if k.Disruptions != nil {
		a := k.Disruptions.admit(ctx, pod, container.Name)
		switch {
		case a.Err != nil:
			k.Metrics.countUnchecked()
			k.warn(pod, container.Name, ReasonDisruptionBudgetUnchecked, fmt.Sprintf(
				"could not check the PodDisruptionBudgets of the pod (%v); the restart of container %s is left to the node's own guards", a.Err, container.Name))
		case !a.Allowed:
			return k.deferKill(pod, container.Name, containerID, DeferPDB, ReasonDisruptionBudget,
				fmt.Sprintf("%s; restart of container %s after its %s probe failure deferred", a.Why, container.Name, strings.ToLower(probeType.String())), true)
		case a.Why != "":
			k.warn(pod, container.Name, ReasonDisruptionBudgetUnchecked, a.Why)
		}
	}
	k.endEpisodes(containerID)
	err := k.Inner.Kill(ctx, pod, container, containerID, probeType, spec)
	k.noteSpent(containerID, err != nil)
	return err
}

// budgetMessage is the RestartBudgetExceeded text: which budget is spent.
func budgetMessage(b *Budget, v Verdict, namespace, container string, probeType probespec.ProbeType) string {
	what := fmt.Sprintf("restart of container %s after its %s probe failure deferred", container, strings.ToLower(probeType.String()))
	if v.ShareSpent {
		return fmt.Sprintf("namespace %s has spent its share of the node's restart budget (%s of %d per minute, split between %d namespaces restarting containers); %s",
			namespace, strconv.FormatFloat(v.Share, 'f', -1, 64), b.PerMinute(), v.Namespaces, what)
	}
	return fmt.Sprintf("the node's restart budget of %d per minute is spent; %s", b.PerMinute(), what)
}

// retrying reports whether a kill of the container already took a token
// and failed: a retry of the same kill decision, which takes no other.
func (k *Guard) retrying(containerID string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.spent[containerID]
	return ok
}

// noteSpent remembers a container whose kill took a token and failed, and
// forgets it once a kill went through. Entries of containers no kill was
// asked for in episodeGap go: their worker has moved on.
func (k *Guard) noteSpent(containerID string, failed bool) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, last := range k.spent {
		if now.Sub(last) > episodeGap {
			delete(k.spent, id)
		}
	}
	if !failed {
		delete(k.spent, containerID)
		return
	}
	if k.spent == nil {
		k.spent = map[string]time.Time{}
	}
	k.spent[containerID] = now
}

// deferKill reports a deferral the first time in an episode and returns it.
func (k *Guard) deferKill(pod *v1.Pod, container, containerID, reason, eventReason, msg string, reprobe bool) error {
	if k.startEpisode(containerID, reason) {
		k.Metrics.countDeferred(reason)
		klog.InfoS("Container restart deferred", "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container,
			"containerID", containerID, "reason", reason, "message", msg)
		if k.Recorder != nil {
			k.Recorder.Event(pod, container, v1.EventTypeWarning, eventReason, msg)
		}
	}
	return &DeferredError{Reason: reason, Message: msg, Reprobe: reprobe}
}

// warn logs and records a Warning event on the container.
func (k *Guard) warn(pod *v1.Pod, container, reason, msg string) {
	klog.InfoS("Container restart", "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container, "reason", reason, "message", msg)
	if k.Recorder != nil {
		k.Recorder.Event(pod, container, v1.EventTypeWarning, reason, msg)
	}
}

// startEpisode notes an attempt and reports whether it starts a new episode.
func (k *Guard) startEpisode(containerID, reason string) bool {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.episodes == nil {
		k.episodes = map[episodeKey]time.Time{}
	}
	for key, last := range k.episodes {
		if now.Sub(last) > episodeGap {
			delete(k.episodes, key)
		}
	}
	key := episodeKey{containerID, reason}
	_, ongoing := k.episodes[key]
	k.episodes[key] = now
	return !ongoing
}

// endEpisodes forgets a container's deferrals once its kill goes ahead.
func (k *Guard) endEpisodes(containerID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.episodes {
		if key.containerID == containerID {
			delete(k.episodes, key)
		}
	}
}

func (k *Guard) now() time.Time {
	if k.Clock == nil {
		return time.Now()
	}
	return k.Clock.Now()
}

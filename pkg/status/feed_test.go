package status

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/results"
)

type feedSink struct {
	mu     sync.Mutex
	states map[types.UID]PodState
	forgot map[types.UID]bool
	set    chan struct{}
}

func newFeedSink() *feedSink {
	return &feedSink{states: map[types.UID]PodState{}, forgot: map[types.UID]bool{}, set: make(chan struct{}, 100)}
}

func (s *feedSink) Set(key PodKey, st PodState) {
	s.mu.Lock()
	s.states[key.UID] = st
	s.mu.Unlock()
	s.set <- struct{}{}
}

func (s *feedSink) Forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.states, uid)
	s.forgot[uid] = true
}

func (s *feedSink) get(uid types.UID) (PodState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[uid]
	return st, ok
}

type feedPods map[types.UID]*v1.Pod

func (p feedPods) Pod(uid types.UID) (*v1.Pod, bool) { pod, ok := p[uid]; return pod, ok }

func feedPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", Generation: 3},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://c1",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		}}},
	}
}

// The path from a result to the writer is the feed alone: a readiness
// result set in the results cache reaches the sink, derived, with no
// manager involved (pkg/status does not import it).
func TestFeedDerivesFromResultsAlone(t *testing.T) {
	pod := feedPod()
	readiness, startup := results.NewManager(), results.NewManager()
	sink := newFeedSink()
	f := NewFeed(FeedOptions{Pods: feedPods{"u1": pod}, Readiness: readiness, Startup: startup, Sink: sink})
	f.SetProbes(ProbeSet{Key: PodKey{Namespace: "ns", Name: "p", UID: "u1"},
		Containers: []ContainerProbes{{Name: "app", Readiness: ProbeState{Live: true}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)

	readiness.Set("containerd://c1", results.Value{Result: results.Success, Probed: true}, pod)
	deadline := time.After(10 * time.Second)
	for {
		if st, ok := sink.get("u1"); ok && len(st.Containers) == 1 && st.Containers[0].Ready {
			if st.Generation != 3 || !st.Containers[0].HasReadiness {
				t.Errorf("state %+v; want the pod's generation and a readiness condition", st)
			}
			break
		}
		select {
		case <-sink.set:
		case <-deadline:
			st, _ := sink.get("u1")
			t.Fatalf("the sink never got Ready; last %+v", st)
		}
	}

	readiness.Set("containerd://c1", results.Value{Result: results.Failure, Probed: true}, pod)
	for {
		if st, _ := sink.get("u1"); len(st.Containers) == 1 && !st.Containers[0].Ready {
			break
		}
		select {
		case <-sink.set:
		case <-deadline:
			t.Fatal("the sink never got the failure")
		}
	}

	f.Forget("u1")
	f.Update("u1")
	if _, ok := sink.get("u1"); ok || !sink.forgot["u1"] {
		t.Error("a forgotten pod's status was derived again")
	}
}

// The seed rules and the ended startup worker, as the manager's
// updateStatus applied them.
func TestFeedSeedsAndEndedStartup(t *testing.T) {
	yes := true
	pod := feedPod()
	sink := newFeedSink()
	f := NewFeed(FeedOptions{Pods: feedPods{"u1": pod}, Readiness: results.NewManager(), Startup: results.NewManager(), Sink: sink})
	key := PodKey{Namespace: "ns", Name: "p", UID: "u1"}
	for _, tc := range []struct {
		name         string
		set          ProbeSet
		ready, start bool
	}{
		{"seed of this instance", ProbeSet{Key: key, Containers: []ContainerProbes{{Name: "app", Readiness: ProbeState{Live: true}}},
			Seeds: map[string]Seed{"app": {ContainerID: "containerd://c1", Ready: &yes}}}, true, true},
		{"seed of another instance", ProbeSet{Key: key, Containers: []ContainerProbes{{Name: "app", Readiness: ProbeState{Live: true}}},
			Seeds: map[string]Seed{"app": {ContainerID: "containerd://old", Ready: &yes}}}, false, true},
		{"ended startup worker counts as started", ProbeSet{Key: key, Containers: []ContainerProbes{{Name: "app", Startup: ProbeState{Ended: true}}}}, true, true},
		{"live startup worker, no result", ProbeSet{Key: key, Containers: []ContainerProbes{{Name: "app", Startup: ProbeState{Live: true}}}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.SetProbes(tc.set)
			f.Update("u1")
			st, _ := sink.get("u1")
			if len(st.Containers) != 1 || st.Containers[0].Ready != tc.ready || st.Containers[0].Started != tc.start {
				t.Errorf("state %+v; want ready %v, started %v", st, tc.ready, tc.start)
			}
		})
	}
	f.SetProbes(ProbeSet{Key: key, Containers: []ContainerProbes{{Name: "app", Readiness: ProbeState{Invalid: true, InvalidMessage: "bad"}}}})
	f.Update("u1")
	if st, _ := sink.get("u1"); len(st.Containers) != 1 || st.Containers[0].Ready || st.Containers[0].ReadyReason != ReasonInvalidProbe {
		t.Errorf("invalid probe: state %+v", st)
	}
}

package prober

import "sync/atomic"

// UserAgent is the version the kubelet puts in the User-Agent of its
// probes ("kube-probe/<major>.<minor>") and of its lifecycle hooks
// ("kube-lifecycle/..."). It may change while probes run: the node's
// kubelet is upgraded in place, and probed follows its Node. Safe for
// concurrent use; a nil *UserAgent is DefaultUserAgentVersion.
type UserAgent struct {
	cur atomic.Pointer[userAgents]
}

// userAgents are the whole header values of one version, made once per
// change, so a probe reads its User-Agent without building it.
type userAgents struct {
	version, probe, lifecycle string
}

// NewUserAgent returns a UserAgent of version ("<major>.<minor>", with the
// kubelet's "+" for a pre-release or vendor build); "" is
// DefaultUserAgentVersion.
func NewUserAgent(version string) *UserAgent {
	u := &UserAgent{}
	u.Set(version)
	return u
}

// Set changes the version; "" is DefaultUserAgentVersion. It reports
// whether the version changed.
func (u *UserAgent) Set(version string) bool {
	if version == "" {
		version = DefaultUserAgentVersion
	}
	if old := u.cur.Load(); old != nil && old.version == version {
		return false
	}
	u.cur.Store(&userAgents{version: version, probe: "kube-probe/" + version, lifecycle: "kube-lifecycle/" + version})
	return true
}

func (u *UserAgent) load() userAgents {
	if u != nil {
		if c := u.cur.Load(); c != nil {
			return *c
		}
	}
	return userAgents{
		version:   DefaultUserAgentVersion,
		probe:     "kube-probe/" + DefaultUserAgentVersion,
		lifecycle: "kube-lifecycle/" + DefaultUserAgentVersion,
	}
}

// Version is "<major>.<minor>" as sent.
func (u *UserAgent) Version() string { return u.load().version }

// Probe is the User-Agent of probes, e.g. "kube-probe/1.37".
func (u *UserAgent) Probe() string { return u.load().probe }

// Lifecycle is the User-Agent of httpGet lifecycle hooks, e.g.
// "kube-lifecycle/1.37".
func (u *UserAgent) Lifecycle() string { return u.load().lifecycle }

package controlplane

// PIDs exposes the children's PIDs to the external test, which checks that
// Stop leaves no process behind.
func (cp *ControlPlane) PIDs() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	pids := map[string]int{}
	if cp.etcd != nil {
		pids["etcd"] = cp.etcd.proc.PID()
	}
	if cp.apiserver != nil && cp.apiserver.pid() != 0 {
		pids["kube-apiserver"] = cp.apiserver.pid()
	}
	return pids
}

// EtcdDataDir is where etcd keeps its data.
func (cp *ControlPlane) EtcdDataDir() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.etcd.dataDir
}

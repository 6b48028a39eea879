// Package controlplane starts a throwaway Kubernetes control plane for
// integration tests: a real etcd and a real kube-apiserver on random loopback
// ports, with certificates generated in Go and all state in a temporary run
// directory, except etcd's data, which is on tmpfs (/dev/shm) unless the
// control plane is detached.
//
// There is no controller-manager, scheduler or kubelet. The tests play those
// parts: they create Nodes, bind Pods with spec.nodeName and write pod status
// themselves. Because nothing creates the per-namespace `default`
// ServiceAccount and `kube-root-ca.crt` ConfigMap, EnsureNamespace does, and
// because no namespace controller runs, a deleted namespace stays Terminating.
//
// The binaries come from hack/build-k8s.sh. Start returns an error wrapping
// ErrBinaryMissing when they are not there, so tests can skip:
//
//	cp, err := controlplane.Start(ctx, controlplane.Options{})
//	if errors.Is(err, controlplane.ErrBinaryMissing) {
//		t.Skip(err)
//	}
package controlplane

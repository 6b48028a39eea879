// Package kubeclient is probed's Kubernetes API client: typed clients for
// only the resources probed reads and writes, on a scheme of only their
// API groups.
//
// client-go's kubernetes.Clientset links a typed client, an apply
// configuration and an informer for every resource of every API group,
// and its scheme registers all of them at start; probed uses six
// resources, and the rest cost it megabytes of executable pages resident
// on every node (docs/benchmarks/footprint.md). The interfaces here are
// subsets of client-go's typed ones, so client-go's fake clientset serves
// them in tests (see FromClientset).
package kubeclient

// Package lifecycle runs a container's lifecycle hooks: exec in the
// container through the container runtime, httpGet to the pod, and sleep,
// the way the kubelet's handler runner (pkg/kubelet/lifecycle) runs them.
//
// What a Runner promises:
//   - one Run runs one hook once and returns when it has finished, failed,
//     or ctx has ended; it never retries;
//   - no hook times itself out, as in the kubelet: the caller bounds it
//     with ctx (probed's kill waits at most the grace period, then stops
//     the container and ends the hook);
//   - a failure's error text is the kubelet's message for it
//     ("Exec lifecycle hook ([...]) for Container ... failed - error: ...");
//   - every connection an httpGet hook makes, redirects included, is judged
//     by probed's host policy (hostpolicy.Guard), as a probe's would be.
package lifecycle

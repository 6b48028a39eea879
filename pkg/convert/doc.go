// Package convert hands the spec probes of Kubernetes manifests to probed
// without a webhook: it rewrites a YAML stream so that every pod template
// (of a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob,
// ReplicationController, PodTemplate, or the items of a List) has its probes
// in the probed.io/probes annotation and the probed.io/ready readiness gate,
// through probespec.Adopt, the code the admission webhook runs.
//
// What it promises:
//   - Everything it does not have to change stays byte for byte: other
//     documents, separators, comments, key order, quoting, blank lines, and
//     the untouched lines of a converted document. Edits are made in the
//     text at the positions the YAML node tree gives, and the result is
//     parsed again and checked to mean exactly the original plus Adopt's
//     changes; in flow style (JSON, {…}) the annotation is written compact.
//     Only when that check fails is a document re-emitted by the YAML
//     encoder, which keeps comments and key order but not the layout; the
//     Result says which documents that happened to.
//   - What the daemon would refuse is refused: every template is judged by
//     probespec.DeclaredProbes, and each problem is an error with its
//     InvalidProbe text.
//   - Besides the kinds above, any object with a standard pod template at
//     spec.template, spec.jobTemplate.spec.template or template (a CloneSet,
//     a Rollout) is converted; every object without one is in the Result,
//     Skipped.
//   - All or nothing: an error (a document that is not YAML, a malformed
//     probed.io/probes annotation, a template that does not decode) names
//     the document and the object, and no output is produced.
//   - Idempotent: converting its own output changes nothing.
//   - A template that opts out (annotation probed.io/inject: "false") or
//     that is probed's own is left alone.
package convert

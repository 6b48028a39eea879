package status

// Reasons for probed's conditions. Each is one CamelCase word; together they
// are the complete set probed writes into the reason field.
//
// On a container's ready.probed.io/<c> and started.probed.io/<c> conditions:
//
//	ProbeSucceeded       True.  The probe's last result for the current container
//	                            instance is Success.
//	ProbeFailed          False. The probe's last result is Failure.
//	ProbePending         False. The probe has no conclusive result yet for the
//	                            current container instance (none, or Unknown).
//	ContainerNotRunning  False. The container is waiting, terminated, or has no
//	                            status yet.
//	WaitingForStartup    False. (readiness only) The container runs but probed's
//	                            startup probe has not succeeded yet.
//	InvalidProbe         False. The probe is invalid and is not run; the message
//	                            says why.
//
// On the pod's probed.io/ready condition:
//
//	AllProbesSucceeded   True.  Every ready.probed.io/* and started.probed.io/*
//	                            condition of the pod is True.
//	NoGatingProbes       True.  The pod has probed probes, but only liveness
//	                            probes, so nothing gates its readiness.
//	ContainersNotReady   False. At least one of those conditions is False; the
//	                            message names the containers.
const (
	ReasonProbeSucceeded      = "ProbeSucceeded"
	ReasonProbeFailed         = "ProbeFailed"
	ReasonProbePending        = "ProbePending"
	ReasonContainerNotRunning = "ContainerNotRunning"
	ReasonWaitingForStartup   = "WaitingForStartup"
	ReasonInvalidProbe        = "InvalidProbe"

	ReasonAllProbesSucceeded = "AllProbesSucceeded"
	ReasonNoGatingProbes     = "NoGatingProbes"
	ReasonContainersNotReady = "ContainersNotReady"
)

// Reasons the kubelet writes on ContainersReady and Ready. Container-status
// mode reproduces them, so that those conditions read as if the kubelet had
// written them.
const (
	kubeletContainersNotReady     = "ContainersNotReady"
	kubeletReadinessGatesNotReady = "ReadinessGatesNotReady"
	kubeletPodCompleted           = "PodCompleted"
	kubeletPodFailed              = "PodFailed"
)

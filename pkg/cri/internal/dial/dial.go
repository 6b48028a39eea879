// Package dial opens the one gRPC connection to the runtime socket that
// every runtime implementation shares, with the kubelet's message limits.
package dial

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMsgSize matches the kubelet's CRI client and containerd's own limit;
// the runtime's own answers (statuses, specs) may be that large. ExecSync,
// whose answer a tenant's command writes, reads at most MaxExecAnswerBytes.
const MaxMsgSize = 16 << 20

// StreamWindow is each call's HTTP/2 flow-control window on the runtime
// connection: what the runtime may send of an answer probed has not read
// yet. Fixed (no BDP growth, which goes up to 16 MiB), so an ExecSync
// answer waiting for the output budget holds no more than this.
const StreamWindow = 64 << 10

// ConnWindow is the connection's: it is refilled as data arrives, so it
// holds nothing back but the calls' throughput.
const ConnWindow = 1 << 20

// Dial connects lazily to endpoint ("unix:///path").
func Dial(endpoint string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(StreamWindow), grpc.WithInitialConnWindowSize(ConnWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

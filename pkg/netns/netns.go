// Package netns opens sockets inside another network namespace (a pod's)
// without leaving any thread of the process in it.
//
// A socket belongs to the network namespace it was created in, whichever
// thread uses it later. So a socket is made on a goroutine of its own,
// locked to its OS thread: setns(2) into the namespace, socket(2), setns(2)
// back. The rest (connect, reads, writes, close) happens on any thread.
// Should the way back fail, the goroutine ends still locked, and the Go
// runtime then ends its thread rather than hand it to other goroutines:
// no thread of the process is ever left in a pod's namespace.
//
// Nothing here calls net.Dial: it may start helper goroutines (Happy
// Eyeballs, golang/go#44922) that would run on threads outside the
// namespace. Sockets are made by hand and connected by hand, then wrapped
// as a net.Conn.
package netns

import (
	"errors"
	"fmt"
	"os"
)

// ErrUnsupported: network namespaces are Linux's.
var ErrUnsupported = errors.New("network namespaces are not supported on this platform")

// NS is an open network namespace. The open file pins the namespace, so
// that it stays the same namespace for as long as NS is open, whatever
// happens to the path it was opened by.
type NS struct {
	f   *os.File
	id  ID
	src string
}

// ID identifies a namespace: the device and inode of its nsfs file.
type ID struct{ Dev, Ino uint64 }

func (i ID) String() string { return fmt.Sprintf("net:[%d]", i.Ino) }

// ID returns the namespace's identity.
func (n *NS) ID() ID { return n.id }

// Path is where the namespace was opened from.
func (n *NS) Path() string { return n.src }

// Close releases the namespace. Sockets made in it stay usable.
func (n *NS) Close() error {
	if n == nil || n.f == nil {
		return nil
	}
	return n.f.Close()
}

//go:build !linux

package netns

import (
	"context"
	"net"
	"net/netip"
)

// Open fails: network namespaces are Linux's.
func Open(string) (*NS, error) { return nil, ErrUnsupported }

// Self fails off Linux.
func Self() (ID, error) { return ID{}, ErrUnsupported }

// Of fails off Linux.
func Of(string) (ID, error) { return ID{}, ErrUnsupported }

// StuckThreads is always 0 off Linux.
func StuckThreads() int { return 0 }

// Do fails off Linux.
func (n *NS) Do(func() error) error { return ErrUnsupported }

// HasAddr fails off Linux.
func (n *NS) HasAddr(netip.Addr) (bool, error) { return false, ErrUnsupported }

// DialTCP fails off Linux.
func (n *NS) DialTCP(context.Context, netip.AddrPort, func(uintptr)) (net.Conn, error) {
	return nil, ErrUnsupported
}

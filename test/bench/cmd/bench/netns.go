package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// A lane is one target server and one driver run against it. Lanes of one
// netns run concurrently, each with its own target (own ports).
type lane struct {
	Driver string   `json:"driver"`
	Args   []string `json:"args"` // "{http}", "{tcp}", "{grpc}" become the target's ports
	// CountTW names the target port ("http", "tcp", "grpc") whose TIME_WAIT
	// sockets are counted once the driver has exited.
	CountTW string `json:"count_tw,omitempty"`
	// Env adds variables to the driver's environment (the opt-in modes).
	Env []string `json:"env,omitempty"`
}

type netnsSpec struct {
	// TWReuse, when set, is written to net.ipv4.tcp_tw_reuse in the new
	// namespace (the host's is untouched).
	TWReuse *int `json:"tw_reuse,omitempty"`
	// PortRange, when set, is written to net.ipv4.ip_local_port_range.
	PortRange string `json:"port_range,omitempty"`
	Target    string `json:"target"`
	TargetCPU int    `json:"target_cpu"` // -1: not pinned
	DriverCPU int    `json:"driver_cpu"`
	Lanes     []lane `json:"lanes"`
}

type laneResult struct {
	Out   json.RawMessage `json:"out,omitempty"`
	Ports map[string]int  `json:"ports,omitempty"`
	TW    *twCount        `json:"tw,omitempty"`
	Err   string          `json:"err,omitempty"`
}

// twCount is the TIME_WAIT sockets of one target port, split by which end
// of the connection the socket is: the prober's (its local port is the
// ephemeral one, the remote is the target) or the server's.
type twCount struct {
	Port       int `json:"port"`
	ProberSide int `json:"prober_side"`
	ServerSide int `json:"server_side"`
}

// runNetns runs spec in a fresh network namespace holding only loopback, so
// that TIME_WAIT counts, the TIME_WAIT table and ephemeral ports are ours
// alone and every run starts clean. It falls back to the host's namespace
// (noted in the result) when a namespace cannot be made.
func (b *bench) runNetns(spec netnsSpec) ([]laneResult, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.self, "netns-run")
	cmd.Stdin = bytes.NewReader(js)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if b.netns {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("netns-run: %v\n%s", err, tail(errb.String(), 4000))
	}
	var res []laneResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("netns-run output: %v: %s", err, tail(out.String(), 2000))
	}
	for _, r := range res {
		if r.Err != "" {
			return res, errors.New(r.Err)
		}
	}
	return res, nil
}

// canNetns reports whether this process may create network namespaces.
func canNetns(self string) bool {
	cmd := exec.Command(self, "netns-probe")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	return cmd.Run() == nil
}

// netnsProbe is the child of canNetns: loopback must come up.
func netnsProbe() error { return loopbackUp() }

// netnsRun is the "netns-run" subcommand, inside the namespace.
func netnsRun() error {
	var spec netnsSpec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	if spec.TWReuse != nil {
		if err := os.WriteFile("/proc/sys/net/ipv4/tcp_tw_reuse", []byte(strconv.Itoa(*spec.TWReuse)), 0o644); err != nil {
			return fmt.Errorf("tcp_tw_reuse: %w", err)
		}
	}
	if spec.PortRange != "" {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte(spec.PortRange), 0o644); err != nil {
			return fmt.Errorf("ip_local_port_range: %w", err)
		}
	}
	res := make([]laneResult, len(spec.Lanes))
	var wg sync.WaitGroup
	for i, l := range spec.Lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = runLane(spec, l)
		}()
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(res)
}

func runLane(spec netnsSpec, l lane) (r laneResult) {
	target := pinned(spec.TargetCPU, spec.Target)
	target.Env = append(os.Environ(), "GOMAXPROCS=1")
	stdin, err := target.StdinPipe()
	if err != nil {
		return laneResult{Err: err.Error()}
	}
	stdout, err := target.StdoutPipe()
	if err != nil {
		return laneResult{Err: err.Error()}
	}
	target.Stderr = os.Stderr
	if err := target.Start(); err != nil {
		return laneResult{Err: "start target: " + err.Error()}
	}
	defer func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- target.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = target.Process.Kill()
			<-done
		}
	}()
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		return laneResult{Err: "target ports: " + err.Error()}
	}
	if err := json.Unmarshal(line, &r.Ports); err != nil {
		return laneResult{Err: "target ports: " + err.Error()}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	args := make([]string, len(l.Args))
	for i, a := range l.Args {
		for name, p := range r.Ports {
			a = strings.ReplaceAll(a, "{"+name+"}", strconv.Itoa(p))
		}
		args[i] = a
	}
	drv := pinned(spec.DriverCPU, l.Driver, args...)
	drv.Env = append(append(os.Environ(), "GOMAXPROCS=1"), l.Env...)
	var out, errb bytes.Buffer
	drv.Stdout, drv.Stderr = &out, &errb
	if err := drv.Run(); err != nil {
		r.Err = fmt.Sprintf("driver %s %v: %v\n%s", l.Driver, args, err, tail(errb.String(), 3000))
		return r
	}
	r.Out = json.RawMessage(bytes.TrimSpace(out.Bytes()))
	if l.CountTW != "" {
		// Let the last closes (and the server's lingering close) finish; the
		// first TIME_WAIT sockets of the run are still far from their 60 s.
		time.Sleep(1500 * time.Millisecond)
		port := r.Ports[l.CountTW]
		c, err := countTimeWait(port)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		r.TW = &c
	}
	return r
}

// pinned returns a command for bin pinned to cpu with taskset, when asked
// and available.
func pinned(cpu int, bin string, args ...string) *exec.Cmd {
	if cpu >= 0 {
		if ts, err := exec.LookPath("taskset"); err == nil {
			return exec.Command(ts, append([]string{"-c", strconv.Itoa(cpu), bin}, args...)...)
		}
	}
	return exec.Command(bin, args...)
}

// countTimeWait reads /proc/net/tcp and tcp6 (this process's namespace) for
// sockets in TIME_WAIT (state 06) with port at either end.
func countTimeWait(port int) (twCount, error) {
	c := twCount{Port: port}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return c, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "06" {
				continue
			}
			lp, rp := hexPort(fs[1]), hexPort(fs[2])
			switch {
			case lp == port:
				c.ServerSide++
			case rp == port:
				c.ProberSide++
			}
		}
	}
	return c, nil
}

func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	v, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(v)
}

// loopbackUp sets IFF_UP on lo, as `ip link set lo up` does.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr struct {
		name  [syscall.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(ifr.name[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return e
	}
	ifr.flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return e
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

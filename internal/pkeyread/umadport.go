package pkeyread

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// UmadDialer is the transport of real hardware: SMPs sent through the local
// HCA port port ("mlx5_0:1", [opensm] smp_port) over the kernel's user MAD
// device for that port. It fails, saying why, when port is empty or malformed,
// when the kernel has no such port (ib_umad not loaded, another device name)
// or speaks another ABI. The device is opened at each Dial: the process needs
// read and write access to /dev/infiniband/umadN (root, or a udev rule), as
// infiniband-diags' tools do.
func UmadDialer(port string) (Dialer, error) {
	return umadHost{}.dialer(port, kernelUmad)
}

// UmadPortOfGUID is the local HCA port ("mlx5_0:1") whose port GUID is guid:
// the port OpenSM runs on where [opensm] guid names it and smp_port is empty.
func UmadPortOfGUID(guid fabric.GUID) (string, error) {
	return umadHost{}.portOfGUID(guid)
}

// umadHost is where the kernel shows its umad devices: root is "" on the
// host, a tree of testdata in tests.
type umadHost struct{ root string }

func (h umadHost) madClass() string { return filepath.Join(h.root, "/sys/class/infiniband_mad") }

// umadPort is one umad device: the HCA port it sends from.
type umadPort struct {
	name   string // "mlx5_0:1"
	device string // "umad0"
}

// ports lists the umad devices the kernel has, in name order, once it
// checked that they speak the ABI this package implements.
func (h umadHost) ports() ([]umadPort, error) {
	abi, err := os.ReadFile(filepath.Join(h.madClass(), "abi_version"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no user MAD devices (%s): is the ib_umad kernel module loaded?", h.madClass())
	}
	if err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(string(abi)); v != strconv.Itoa(umadABIVersion) {
		return nil, fmt.Errorf("the kernel's user MAD ABI is version %s, this manager speaks %d", v, umadABIVersion)
	}
	entries, err := os.ReadDir(h.madClass())
	if err != nil {
		return nil, err
	}
	var ports []umadPort
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "umad") { // issmN: the SM's own flag, not ours
			continue
		}
		dev, err1 := os.ReadFile(filepath.Join(h.madClass(), e.Name(), "ibdev"))
		num, err2 := os.ReadFile(filepath.Join(h.madClass(), e.Name(), "port"))
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("user MAD device %s: %w", e.Name(), err)
		}
		name := strings.TrimSpace(string(dev)) + ":" + strings.TrimSpace(string(num))
		ports = append(ports, umadPort{name: name, device: e.Name()})
	}
	slices.SortFunc(ports, func(a, b umadPort) int { return strings.Compare(a.name, b.name) })
	return ports, nil
}

// dialer finds port's umad device.
func (h umadHost) dialer(port string, ops umadOps) (Dialer, error) {
	ports, err := h.ports()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range ports {
		if p.name == port {
			return umadDialer{port: port, path: filepath.Join(h.root, "/dev/infiniband", p.device), ops: ops}, nil
		}
		names = append(names, p.name)
	}
	local := "the host has none"
	if len(names) > 0 {
		local = "the host's: " + strings.Join(names, ", ")
	}
	if port == "" {
		return nil, fmt.Errorf("no HCA port to send SMPs from: set [opensm] smp_port to a local port (%s)", local)
	}
	if dev, num, ok := strings.Cut(port, ":"); !ok || dev == "" || num == "" {
		return nil, fmt.Errorf("HCA port %q: want device:port, e.g. mlx5_0:1 (%s)", port, local)
	}
	return nil, fmt.Errorf("HCA port %s: no such local port (%s)", port, local)
}

// portOfGUID finds the local port whose GID 0 ends in guid (a port's GID 0
// is the subnet prefix and its port GUID).
func (h umadHost) portOfGUID(guid fabric.GUID) (string, error) {
	ports, err := h.ports()
	if err != nil {
		return "", err
	}
	for _, p := range ports {
		dev, num, _ := strings.Cut(p.name, ":")
		gid, err := os.ReadFile(filepath.Join(h.root, "/sys/class/infiniband", dev, "ports", num, "gids/0"))
		if err != nil {
			return "", fmt.Errorf("HCA port %s: %w", p.name, err)
		}
		hex := strings.ReplaceAll(strings.TrimSpace(string(gid)), ":", "")
		if len(hex) != 32 {
			return "", fmt.Errorf("HCA port %s: GID %q is not 128 bits", p.name, gid)
		}
		g, err := strconv.ParseUint(hex[16:], 16, 64)
		if err != nil {
			return "", fmt.Errorf("HCA port %s: GID %q: %w", p.name, gid, err)
		}
		if fabric.GUID(g) == guid {
			return p.name, nil
		}
	}
	return "", fmt.Errorf("no local HCA port has GUID %s: set [opensm] smp_port", guid)
}

package smcontainer

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// A privileged manager's container (every device and capability of the host)
// does not make OpenSM's privileged; the devices and cgroup rules it was given
// are passed on, as OpenSM opens them. The engine here cannot run a privileged
// container (its host withholds a capability), so this looks at what the
// driver asks of the engine; TestManagedGivesOpenSMOnlyWhatItNeeds runs it.
func TestManagedNeverCopiesThePrivilege(t *testing.T) {
	umad := container.DeviceMapping{PathOnHost: "/dev/infiniband/umad0", PathInContainer: "/dev/infiniband/umad0",
		CgroupPermissions: "rwm"}
	mgr := &container.InspectResponse{ID: "f00d", HostConfig: &container.HostConfig{
		Privileged: true, CapAdd: []string{"SYS_ADMIN", "NET_ADMIN"}, SecurityOpt: []string{"seccomp=unconfined"},
		Resources: container.Resources{Devices: []container.DeviceMapping{umad},
			DeviceCgroupRules: []string{"c 231:* rwm"}}}}
	m := &Managed{manager: mgr, log: slog.New(slog.DiscardHandler)}
	hc := m.hostConfig(nil)
	if hc.Privileged || len(hc.CapAdd) > 0 || !slices.Equal(hc.CapDrop, []string{"ALL"}) {
		t.Errorf("privileged %v, cap-add %v, cap-drop %v; want no privilege, every capability dropped",
			hc.Privileged, hc.CapAdd, hc.CapDrop)
	}
	if !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("security options %v; want no-new-privileges alone", hc.SecurityOpt)
	}
	if !slices.Contains(hc.Devices, umad) || !slices.Equal(hc.DeviceCgroupRules, []string{"c 231:* rwm"}) {
		t.Errorf("devices %v, cgroup rules %v; want the manager's", hc.Devices, hc.DeviceCgroupRules)
	}
	if hc.PidMode != "container:f00d" || hc.LogConfig.Type != "none" || !hc.AutoRemove {
		t.Errorf("pid mode %q, log %q, auto-remove %v", hc.PidMode, hc.LogConfig.Type, hc.AutoRemove)
	}
}

// With [opensm] user, OpenSM's container runs as the user's ids, with its
// supplementary groups (the devices' group); without it, as the image says.
func TestManagedRunsAsOpenSMUser(t *testing.T) {
	mgr := &container.InspectResponse{ID: "f00d", HostConfig: &container.HostConfig{}}
	m := &Managed{manager: mgr, log: slog.New(slog.DiscardHandler)}
	if u, g := m.containerUser(), m.hostConfig(nil).GroupAdd; u != "" || len(g) > 0 {
		t.Errorf("no user: container user %q, groups %v; want the image's", u, g)
	}
	m.cfg.User = &opensm.RunAs{Name: "afm-opensm", UID: 998, GID: 997, Groups: []uint32{996}}
	if u, g := m.containerUser(), m.hostConfig(nil).GroupAdd; u != "998:997" || !slices.Equal(g, []string{"996"}) {
		t.Errorf("afm-opensm: container user %q, groups %v; want 998:997 and 996", u, g)
	}
}

package config

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Where the manager and OpenSM meet in [opensm] config_dir, and the port
// OpenSM runs on: read by the manager and by the operator's commands alike.

// SubnetDump is where OpenSM writes its subnet dump: the manager writes
// dump_files_dir = config_dir into opensm.conf.
func (o OpenSM) SubnetDump() string {
	return filepath.Join(o.ConfigDir, topology.FileName)
}

// DriverStatusFile is where the manager's OpenSM supervisor reports its
// state (the file's name is older than the supervisor).
func (o OpenSM) DriverStatusFile() string {
	return filepath.Join(o.ConfigDir, "driver-status.json")
}

// OpenSMGUID is f's opensm.conf guid ([opensm_conf] guid for the default
// fabric): the port its OpenSM runs on; 0 when not set.
func (f Fabric) OpenSMGUID() (fabric.GUID, error) {
	for _, kv := range f.OpenSMConf {
		if strings.EqualFold(kv.Key, "guid") {
			g, err := fabric.ParseGUID(kv.Value)
			if err != nil {
				return 0, fmt.Errorf("[opensm_conf] guid %q: %w", kv.Value, err)
			}
			return g, nil
		}
	}
	return 0, nil
}

package audit

import (
	"encoding/json"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// findingJSON is a Finding as --audit --json prints it and the database
// keeps it: GUIDs in their canonical text, as everywhere else operators
// read them.
type findingJSON struct {
	Kind       Kind   `json:"kind"`
	Port       string `json:"port,omitempty"`
	Switch     string `json:"switch,omitempty"`
	SwitchPort int    `json:"switch_port,omitempty"`
	PKey       string `json:"pkey,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Want       string `json:"want,omitempty"`
	Got        string `json:"got,omitempty"`
	Text       string `json:"text"`
	HostOnly   bool   `json:"host_only,omitempty"`
}

func (f Finding) MarshalJSON() ([]byte, error) {
	j := findingJSON{Kind: f.Kind, Owner: f.Owner, Want: f.Want, Got: f.Got, Text: f.Text, HostOnly: f.HostOnly}
	if f.Port != 0 {
		j.Port = f.Port.String()
	}
	if f.Switch != nil {
		j.Switch, j.SwitchPort = f.Switch.GUID.String(), f.Switch.Port
	}
	if f.PKey != 0 {
		j.PKey = fmt.Sprintf("0x%04x", f.PKey)
	}
	return json.Marshal(j)
}

func (f *Finding) UnmarshalJSON(data []byte) error {
	var j findingJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*f = Finding{Kind: j.Kind, Owner: j.Owner, Want: j.Want, Got: j.Got, Text: j.Text, HostOnly: j.HostOnly}
	var err error
	if j.Port != "" {
		if f.Port, err = fabric.ParseGUID(j.Port); err != nil {
			return fmt.Errorf("finding's port: %w", err)
		}
	}
	if j.Switch != "" {
		sw := pkeyread.SwitchPort{Port: j.SwitchPort}
		if sw.GUID, err = fabric.ParseGUID(j.Switch); err != nil {
			return fmt.Errorf("finding's switch: %w", err)
		}
		f.Switch = &sw
	}
	if j.PKey != "" {
		if _, err := fmt.Sscanf(j.PKey, "0x%x", &f.PKey); err != nil {
			return fmt.Errorf("finding's pkey %q: %w", j.PKey, err)
		}
	}
	return nil
}

package pkeyread

import (
	"encoding/binary"
	"testing"
)

func TestParseSMInfo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		guid     uint64
		byte20   byte
		want     SMInfo
		wantText string
	}{
		{"master of priority 15", 0x0002c90300a10001, 0xf3, SMInfo{GUID: 0x0002c90300a10001, Priority: 15, State: SMMaster, LID: 7}, "MASTER"},
		{"standby of priority 0", 0x0002c90300a00001, 0x02, SMInfo{GUID: 0x0002c90300a00001, Priority: 0, State: SMStandby, LID: 7}, "STANDBY"},
		{"not active", 1, 0x10, SMInfo{GUID: 1, Priority: 1, State: SMNotActive, LID: 7}, "NOTACTIVE"},
		{"discovering", 1, 0x51, SMInfo{GUID: 1, Priority: 5, State: SMDiscovering, LID: 7}, "DISCOVERING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, smpDataSize)
			binary.BigEndian.PutUint64(data, tc.guid)
			binary.BigEndian.PutUint64(data[8:], 0xdeadbeef) // SM_Key: not read
			data[20] = tc.byte20
			got := parseSMInfo(data, 7)
			if got != tc.want || got.State.String() != tc.wantText {
				t.Fatalf("parseSMInfo = %+v (%s), want %+v (%s)", got, got.State, tc.want, tc.wantText)
			}
		})
	}
}

func TestParsePortInfo(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lid, master  uint16
		capabilities uint32
		wantIsSM     bool
	}{
		{"the master's own port", 1, 1, 0x0251084a, true},
		{"a host's port", 5, 2, 0x02510848, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, smpDataSize)
			binary.BigEndian.PutUint16(data[16:], tc.lid)
			binary.BigEndian.PutUint16(data[18:], tc.master)
			binary.BigEndian.PutUint32(data[20:], tc.capabilities)
			got := parsePortInfo(data)
			if got.LID != tc.lid || got.MasterSMLID != tc.master || got.IsSM != tc.wantIsSM {
				t.Fatalf("parsePortInfo = %+v", got)
			}
		})
	}
}

// M_KeyProtectBits are PortInfo's bits 272-273, beside the LMC.
func TestParsePortInfoMKeyProtect(t *testing.T) {
	for _, tc := range []struct {
		byte34 byte
		want   uint8
	}{{0x00, 0}, {0x43, 1}, {0x80, 2}, {0xc7, 3}} {
		data := make([]byte, smpDataSize)
		data[34] = tc.byte34
		if got := parsePortInfo(data).MKeyProtect; got != tc.want {
			t.Errorf("byte 34 = 0x%02x: MKeyProtect %d, want %d", tc.byte34, got, tc.want)
		}
	}
}

package fabric

import (
	"errors"
	"strings"
	"testing"
)

func TestParseClientID(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    GUID
		wantErr string // substring of the error; "" means success
	}{
		// The published examples of networking-mlnx's client-ids.
		{name: "vendor form, Mellanox OUI", in: "ff:00:00:00:00:00:02:00:00:02:c9:00:00:02:c9:03:00:00:10:39", want: 0x0002c90300001039},
		{name: "vendor form, other OUI", in: "ff:00:00:00:00:00:02:00:00:02:c9:00:f4:52:14:03:00:28:00:80", want: 0xf452140300280080},
		{name: "hardware form from a VF MAC", in: "20:01:23:45:00:00:67:89:ab", want: 0x01234500006789ab},
		{name: "vendor form from a VF MAC", in: "ff:00:00:00:00:00:02:00:00:02:c9:00:01:23:45:00:00:67:89:ab", want: 0x01234500006789ab},
		{name: "hardware form, fa:16:3e MAC", in: "20:fa:16:3e:00:00:5b:7c:1d", want: 0xfa163e00005b7c1d},
		{name: "vendor form, fa:16:3e MAC", in: "ff:00:00:00:00:00:02:00:00:02:c9:00:fa:16:3e:00:00:5b:7c:1d", want: 0xfa163e00005b7c1d},

		// Separators and case.
		{name: "dash separated", in: "20-01-23-45-00-00-67-89-ab", want: 0x01234500006789ab},
		{name: "space separated", in: "20 01 23 45 00 00 67 89 ab", wantErr: "not hexadecimal"},
		{name: "no separator, hardware form", in: "2001234500006789ab", want: 0x01234500006789ab},
		{name: "no separator, vendor form", in: "ff00000000000200000002c9000002c90300001039", want: 0x0002c90300001039},
		{name: "upper case", in: "FF:00:00:00:00:00:02:00:00:02:C9:00:F4:52:14:03:00:28:00:80", want: 0xf452140300280080},
		{name: "mixed case", in: "20:Fa:16:3E:00:00:5b:7C:1d", want: 0xfa163e00005b7c1d},
		{name: "surrounding spaces", in: "  20:01:23:45:00:00:67:89:ab\n", want: 0x01234500006789ab},
		{name: "other first octet", in: "01:01:23:45:00:00:67:89:ab", want: 0x01234500006789ab},
		{name: "more than 20 octets", in: "00:ff:00:00:00:00:00:02:00:00:02:c9:00:00:02:c9:03:00:00:10:39", want: 0x0002c90300001039},

		// Too short: 8 octets cannot be a prefix plus a GUID.
		{name: "GUID alone", in: "01:23:45:00:00:67:89:ab", wantErr: "8 octets, want at least 9"},
		{name: "GUID alone, no separator", in: "01234500006789ab", wantErr: "8 octets"},
		{name: "one octet", in: "20", wantErr: "1 octets"},
		{name: "empty", in: "", wantErr: "0 octets"},
		{name: "spaces only", in: "   ", wantErr: "0 octets"},

		// Malformed octets.
		{name: "non-hex octet", in: "20:01:23:45:00:00:67:89:zz", wantErr: `octet "zz" is not hexadecimal`},
		{name: "non-hex, no separator", in: "2001234500006789ag", wantErr: "not hexadecimal"},
		{name: "odd length, no separator", in: "2001234500006789a", wantErr: "odd number of hex digits"},
		{name: "one-digit octet", in: "20:1:23:45:00:00:67:89:ab", wantErr: `octet "1" is not two hex digits`},
		{name: "three-digit octet", in: "20:001:23:45:00:00:67:89:ab", wantErr: `octet "001" is not two hex digits`},
		{name: "trailing colon", in: "20:01:23:45:00:00:67:89:ab:", wantErr: `octet "" is not two hex digits`},
		{name: "doubled colon", in: "20:01:23:45::00:00:67:89:ab", wantErr: `octet "" is not two hex digits`},
		{name: "mixed separators", in: "20:01-23:45:00:00:67:89:ab", wantErr: `octet "01-23" is not two hex digits`},
		{name: "0x prefix", in: "0x2001234500006789ab", wantErr: `octet "0x" is not hexadecimal`},
		{name: "sign in an octet", in: "20:+1:23:45:00:00:67:89:ab", wantErr: `octet "+1" is not hexadecimal`},
		{name: "non-ASCII", in: "20:01:23:45:00:00:67:89:aé", wantErr: "is not two hex digits"},

		// GUIDs that are no port's.
		{name: "zero GUID, hardware form", in: "20:00:00:00:00:00:00:00:00", wantErr: "GUID 0x0000000000000000 is not a port GUID"},
		{name: "zero GUID, vendor form", in: "ff:00:00:00:00:00:02:00:00:02:c9:00:00:00:00:00:00:00:00:00", wantErr: "is not a port GUID"},
		{name: "all-ones GUID", in: "20:ff:ff:ff:ff:ff:ff:ff:ff", wantErr: "GUID 0xffffffffffffffff is not a port GUID"},
		{name: "all-ones GUID, upper case, no separator", in: "20FFFFFFFFFFFFFFFF", wantErr: "is not a port GUID"},
		{name: "GUID one above zero", in: "20:00:00:00:00:00:00:00:01", want: 0x0000000000000001},
		{name: "GUID one below all-ones", in: "20:ff:ff:ff:ff:ff:ff:ff:fe", want: 0xfffffffffffffffe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClientID(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseClientID(%q) = %s, want an error containing %q", tt.in, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseClientID(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseClientID(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseClientID(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestGUIDString(t *testing.T) {
	tests := []struct {
		in   GUID
		want string
	}{
		{0, "0x0000000000000000"},
		{0x0002c90300001039, "0x0002c90300001039"},
		{0xF452140300280080, "0xf452140300280080"},
		{^GUID(0), "0xffffffffffffffff"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("GUID(%#x).String() = %q, want %q", uint64(tt.in), got, tt.want)
		}
	}
}

func TestParseGUID(t *testing.T) {
	tests := []struct {
		in      string
		want    GUID
		wantErr string
	}{
		{in: "0x0002c90300001039", want: 0x0002c90300001039},
		{in: "0xF452140300280080", want: 0xf452140300280080},
		{in: "0x1", want: 1},
		{in: "0x", wantErr: "want 0x followed by up to 16 hex digits"},
		{in: "0002c90300001039", wantErr: "want 0x"},
		{in: "0X0002c90300001039", wantErr: "want 0x"},
		{in: "0x00002c90300001039", wantErr: "up to 16 hex digits"},
		{in: "0x0002c9030000103g", wantErr: "not hexadecimal"},
		{in: "0x-1", wantErr: "not hexadecimal"},
		{in: " 0x1", wantErr: "want 0x"},
	}
	for _, tt := range tests {
		got, err := ParseGUID(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseGUID(%q) = %s, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseGUID(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestPKeyString(t *testing.T) {
	tests := []struct {
		in   PKey
		want string
	}{
		{1, "0x0001"},
		{0x64, "0x0064"},
		{MaxNetworkPKey, "0x7ffe"},
		{DefaultPKey, "0x7fff"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("PKey(%d).String() = %q, want %q", uint16(tt.in), got, tt.want)
		}
	}
}

func TestClientIDFromOptions(t *testing.T) {
	str := func(s string) *string { return &s }
	const hw = "20:01:23:45:00:00:67:89:ab"
	const vendor = "ff:00:00:00:00:00:02:00:00:02:c9:00:00:02:c9:03:00:00:10:39"

	tests := []struct {
		name    string
		opts    []DHCPOption
		want    GUID
		wantErr string // substring; "" means success
		noID    bool   // want ErrNoClientID
	}{
		{name: "named client-id", opts: []DHCPOption{{Name: "client-id", Value: str(hw)}}, want: 0x01234500006789ab},
		{name: "named 61", opts: []DHCPOption{{Name: "61", Value: str(vendor)}}, want: 0x0002c90300001039},
		{
			name: "other options around it",
			opts: []DHCPOption{
				{Name: "tftp-server", Value: str("10.0.0.1")},
				{Name: "61", Value: str(hw)},
				{Name: "bootfile-name", Value: str("pxelinux.0")},
			},
			want: 0x01234500006789ab,
		},
		{
			name: "first usable wins, whatever its name",
			opts: []DHCPOption{{Name: "61", Value: str(vendor)}, {Name: "client-id", Value: str(hw)}},
			want: 0x0002c90300001039,
		},
		{
			name: "first usable wins, client-id first",
			opts: []DHCPOption{{Name: "client-id", Value: str(hw)}, {Name: "61", Value: str(vendor)}},
			want: 0x01234500006789ab,
		},
		{
			name: "null value skipped",
			opts: []DHCPOption{{Name: "client-id", Value: nil}, {Name: "61", Value: str(hw)}},
			want: 0x01234500006789ab,
		},
		{
			name: "empty and blank values skipped",
			opts: []DHCPOption{{Name: "61", Value: str("")}, {Name: "client-id", Value: str("  ")}, {Name: "61", Value: str(vendor)}},
			want: 0x0002c90300001039,
		},
		{name: "no options", opts: nil, noID: true},
		{name: "only other options", opts: []DHCPOption{{Name: "tftp-server", Value: str(hw)}}, noID: true},
		{name: "names are exact", opts: []DHCPOption{{Name: "Client-ID", Value: str(hw)}, {Name: "061", Value: str(hw)}, {Name: "client_id", Value: str(hw)}}, noID: true},
		{name: "only null and empty", opts: []DHCPOption{{Name: "client-id", Value: nil}, {Name: "61", Value: str("")}}, noID: true},
		{
			name:    "first usable value is bad: no fallback to a later one",
			opts:    []DHCPOption{{Name: "61", Value: str("not-a-client-id")}, {Name: "client-id", Value: str(hw)}},
			wantErr: `client-id "not-a-client-id"`,
		},
		{name: "zero GUID", opts: []DHCPOption{{Name: "client-id", Value: str("20:00:00:00:00:00:00:00:00")}}, wantErr: "not a port GUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClientIDFromOptions(tt.opts)
			switch {
			case tt.noID:
				if !errors.Is(err, ErrNoClientID) {
					t.Fatalf("got %s, %v; want ErrNoClientID", got, err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %s, %v; want an error containing %q", got, err, tt.wantErr)
				}
				if errors.Is(err, ErrNoClientID) {
					t.Fatalf("a malformed client-id must not read as a missing one: %v", err)
				}
			default:
				if err != nil || got != tt.want {
					t.Fatalf("got %s, %v; want %s", got, err, tt.want)
				}
			}
		})
	}
}

func FuzzParseClientID(f *testing.F) {
	for _, seed := range []string{
		"ff:00:00:00:00:00:02:00:00:02:c9:00:00:02:c9:03:00:00:10:39",
		"20:01:23:45:00:00:67:89:ab",
		"20-01-23-45-00-00-67-89-ab",
		"2001234500006789ab",
		"20:ff:ff:ff:ff:ff:ff:ff:ff",
		"20:00:00:00:00:00:00:00:00",
		"2001234500006789a",
		"::::::::",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseClientID(s)
		if err != nil {
			return
		}
		if g == 0 || g == ^GUID(0) {
			t.Fatalf("ParseClientID(%q) accepted %s", s, g)
		}
		text := g.String()
		if len(text) != 18 || text != strings.ToLower(text) {
			t.Fatalf("GUID %#x prints as %q, want 0x and 16 lower-case hex digits", uint64(g), text)
		}
		back, err := ParseGUID(text)
		if err != nil {
			t.Fatalf("ParseGUID(%q) of a parsed client-id: %v", text, err)
		}
		if back != g {
			t.Fatalf("ParseGUID(%q) = %s, want %s", text, back, g)
		}
	})
}

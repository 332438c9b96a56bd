package driver

import (
	"strconv"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Place is one of a job's places as job_places holds it (store.Place): a
// host port's GUID, a pkey, and what the port's table must hold there
// ("full", "limited" or "absent").
type Place struct {
	GUID fabric.GUID
	PKey fabric.PKey
	Want string
}

// PlacesJSON is places as a JSON array of {"guid", "pkey", "want"}, the GUID
// as its column holds it: what an engine that expands them on the server
// (json_each, JSON_TABLE, jsonb_array_elements) takes, in one statement
// whatever their count.
func PlacesJSON(places []Place) string {
	var b strings.Builder
	b.Grow(len(places) * 56)
	b.WriteByte('[')
	for i, p := range places {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"guid":`)
		b.WriteString(strconv.Quote(p.GUID.String()))
		b.WriteString(`,"pkey":`)
		b.WriteString(strconv.FormatUint(uint64(uint16(p.PKey)), 10))
		b.WriteString(`,"want":`)
		b.WriteString(strconv.Quote(p.Want))
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

package driver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Place is one of a job's places (store.Place): a host port's GUID, a
// pkey, and what the port's table must hold there ("full", "limited" or
// "absent").
type Place struct {
	GUID fabric.GUID
	PKey fabric.PKey
	Want string
}

// PlacesJSON is places as a JSON array of {"guid", "pkey", "want"}, the GUID
// as job_places' column holds it: the jobs' places column, which each
// engine's JSON functions also expand (json_each, JSON_TABLE,
// jsonb_array_elements: migration 00019's down, an operator's query).
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

// placeJSON is one element of PlacesJSON's array.
type placeJSON struct {
	GUID string `json:"guid"`
	PKey uint16 `json:"pkey"`
	Want string `json:"want"`
}

// ParsePlacesJSON reads places as PlacesJSON wrote them; "" is none (a job
// recorded with no places, or whose places are rows of job_places).
func ParsePlacesJSON(s string) ([]Place, error) {
	if s == "" {
		return nil, nil
	}
	var in []placeJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("places %.40q: %w", s, err)
	}
	out := make([]Place, len(in))
	for i, p := range in {
		guid, err := fabric.ParseGUID(p.GUID)
		if err != nil {
			return nil, fmt.Errorf("place %d: %w", i, err)
		}
		out[i] = Place{GUID: guid, PKey: fabric.PKey(p.PKey), Want: p.Want}
	}
	return out, nil
}

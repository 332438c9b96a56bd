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
// recorded with no places, or whose places are rows of job_places). The
// applier reads every open job's at each sweep: the layout PlacesJSON
// writes is read directly, for a tenth of what decoding JSON costs; any
// other JSON of the same array (one a DBA wrote) is decoded.
func ParsePlacesJSON(s string) ([]Place, error) {
	if s == "" {
		return nil, nil
	}
	if out, ok := parseWrittenPlaces(s); ok {
		return out, nil
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

// parseWrittenPlaces reads s if it is laid out exactly as PlacesJSON
// writes it; false otherwise (then json decodes it, or says why not).
func parseWrittenPlaces(s string) ([]Place, bool) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false
	}
	body := s[1 : len(s)-1]
	out := make([]Place, 0, strings.Count(body, "{"))
	for body != "" {
		rest, ok := strings.CutPrefix(body, `{"guid":"`)
		if !ok {
			return nil, false
		}
		var guid, pkey, want string
		if guid, rest, ok = strings.Cut(rest, `","pkey":`); !ok {
			return nil, false
		}
		if pkey, rest, ok = strings.Cut(rest, `,"want":"`); !ok {
			return nil, false
		}
		if want, rest, ok = strings.Cut(rest, `"}`); !ok || strings.ContainsAny(want, `\"`) {
			return nil, false
		}
		g, err := fabric.ParseGUID(guid)
		if err != nil {
			return nil, false
		}
		k, err := strconv.ParseUint(pkey, 10, 16)
		if err != nil {
			return nil, false
		}
		out = append(out, Place{GUID: g, PKey: fabric.PKey(k), Want: want})
		if body, ok = strings.CutPrefix(rest, ","); !ok && rest != "" {
			return nil, false
		}
	}
	return out, true
}

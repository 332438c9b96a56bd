package partitions

import (
	"context"
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

func TestStaticPKeysOf(t *testing.T) {
	tpl, err := ParseTemplate("static.j2", []byte(`{{ default_partition }}
storage=0x0200 : 0x0002c90300000101=full, 0x0002c90300000102=limited ;
everyone=0x0201 : ALL=limited ;
hosts=0x0202 : ALL_CAS=limited ;
switches=0x0203 : ALL_SWITCHES=full ;
sm=0x0204 : SELF=full ;
{% for n in networks %}
{{ n.name }}={{ n.pkey }} :{{ n.members_text }} ;
{% endfor %}
{{ flat.name }}={{ flat.pkey }} :{{ flat.members_text }} ;
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := tpl.Static(context.Background(), defaultPartition, 0x7ffe)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		guid fabric.GUID
		want []fabric.PKey
	}{
		{0x0002c90300000101, []fabric.PKey{0x7fff, 0x0200, 0x0201, 0x0202}},
		{0x0002c90300000102, []fabric.PKey{0x7fff, 0x0200, 0x0201, 0x0202}},
		{0x0002c90300000103, []fabric.PKey{0x7fff, 0x0201, 0x0202}},
	}
	for _, tt := range tests {
		got := st.PKeysOf(tt.guid)
		slices.Sort(got)
		slices.Sort(tt.want)
		if !slices.Equal(got, tt.want) {
			t.Errorf("PKeysOf(%s) = %v, want %v", tt.guid, got, tt.want)
		}
	}
	if name, ok := st.Name(0x0200); !ok || name != "storage" {
		t.Errorf("Name(0x0200) = %q, %v; want storage", name, ok)
	}
	for _, p := range []fabric.PKey{0x7fff, 0x7ffe, 0x0065} {
		if name, ok := st.Name(p); ok {
			t.Errorf("Name(%s) = %q: not a static partition", p, name)
		}
	}
}

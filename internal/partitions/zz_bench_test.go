package partitions

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkZZRender(b *testing.B) {
	s := randomState(rand.New(rand.NewPCG(3, 4)), 4000, 50000)
	b.ReportAllocs()
	for b.Loop() {
		Render(s)
	}
}
func BenchmarkZZParse(b *testing.B) {
	s := randomState(rand.New(rand.NewPCG(3, 4)), 4000, 50000)
	out, _ := Render(s)
	b.ReportAllocs()
	for b.Loop() {
		Parse(out)
	}
}
func BenchmarkZZCheck(b *testing.B) {
	s := randomState(rand.New(rand.NewPCG(3, 4)), 4000, 50000)
	out, _ := Render(s)
	b.ReportAllocs()
	for b.Loop() {
		Check(out, s)
	}
}

package opensm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReplaceFile is an apply's write of the partitions file, up to
// the SIGHUP (durable runs outside the timer, as during the sweep): the
// file synced before its rename (ReplaceFile, driver docker) and after it
// (ReplaceFileSyncLate), and the latter into a file made ahead, outside the
// timer as after the apply before (Replacer, drivers process and managed),
// at the sizes of a few hosts' file and of 1,500 hosts'.
func BenchmarkReplaceFile(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, tc := range []struct {
			name    string
			replace func(string, []byte, os.FileMode) (func() error, error)
		}{{"synced", ReplaceFile}, {"late", ReplaceFileSyncLate}, {"ahead", nil}} {
			b.Run(fmt.Sprintf("%s/%dKiB", tc.name, size>>10), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "partitions.conf")
				data := make([]byte, size)
				if err := WriteFileAtomic(path, data, 0o644); err != nil {
					b.Fatal(err)
				}
				r := NewReplacer(path)
				defer r.Close()
				replace := tc.replace
				if replace == nil {
					replace = func(_ string, data []byte, mode os.FileMode) (func() error, error) { return r.Replace(data, mode) }
				}
				for i := 0; b.Loop(); i++ {
					data[0] = byte(i)
					durable, err := replace(path, data, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := durable(); err != nil {
						b.Fatal(err)
					}
					if tc.replace == nil {
						if err := r.Ready(); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			})
		}
	}
}

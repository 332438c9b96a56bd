package partitions_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
)

func ExampleTemplate_Render() {
	state := partitions.State{
		Revision:         12,
		DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
		Networks: []partitions.Network{
			{ID: "7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d", PKey: 0x0065},
			{ID: "3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f", PKey: 0x0064, Members: []fabric.GUID{0x0002c90300000201, 0x0002c90300000101}},
		},
		Flat: partitions.FlatPartition{PKey: 0x7ffe, Members: []fabric.GUID{0x0002c90300000301}},
	}
	text, err := partitions.BuiltinTemplate().Render(context.Background(), state)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(text))
	fmt.Println(partitions.Check(text, state))
	// Output:
	// # Written by alternative-fabric-manager from revision 12. Do not edit: it is rewritten from the database.
	// Default=0x7fff, ipoib : ALL=limited, SELF=full ;
	// net-0064-3f1c5a9e-8d2b-4c7a-9e6=0x0064, ipoib :
	//     0x0002c90300000101=full,
	//     0x0002c90300000201=full ;
	// net-0065-7a2b4c6d-1e3f-4a5b-8c7=0x0065 : ;
	// flat=0x7ffe, ipoib :
	//     0x0002c90300000301=full ;
	// <nil>
}

func ExampleCheck() {
	state := partitions.State{
		DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
		Networks: []partitions.Network{
			{ID: "net-a", PKey: 0x0064, Members: []fabric.GUID{0x0002c90300000101}},
		},
		Flat: partitions.FlatPartition{PKey: 0x7ffe},
	}
	// An edited file: the port is limited, and also in a static partition.
	text := []byte(`Default=0x7fff, ipoib : ALL=limited, SELF=full ;
tenant-a=0x0064, ipoib : 0x0002c90300000101=limited ;
storage=0x0200 : 0x0002c90300000101=full ;
flat=0x7ffe, ipoib : ;
`)
	var perr *partitions.Error
	if errors.As(partitions.Check(text, state), &perr) {
		for _, p := range perr.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// line 2: port 0x0002c90300000101 must be a full member of network net-a's partition, not limited
	// line 3: port 0x0002c90300000101 of network net-a may be in no other partition, here storage (0x0200)
}

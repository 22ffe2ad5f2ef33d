package sdkhost

import (
	"errors"
	"net/netip"
	"testing"

	"switchyard.dev/switchyard/sdk"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func TestFromPBConntrackFilter(t *testing.T) {
	ep := netip.MustParseAddr("10.244.2.7").As4()
	got, err := fromPBConntrackFilter(&pb.ConntrackFlushRequest{Zone: 3, Protocol: 17,
		Reply: &pb.ConntrackTuple{Src: ep[:], SrcPort: 53}})
	want := sdk.ConntrackFilter{Zone: 3, Protocol: 17, Reply: sdk.ConntrackTuple{Src: netip.AddrFrom4(ep), SrcPort: 53}}
	if err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	for name, r := range map[string]*pb.ConntrackFlushRequest{
		"address of 5 bytes": {Zone: 3, Orig: &pb.ConntrackTuple{Dst: []byte{1, 2, 3, 4, 5}}},
		"port 70000":         {Zone: 3, Reply: &pb.ConntrackTuple{SrcPort: 70000}},
		"zone 70000":         {Zone: 70000},
		"protocol 300":       {Zone: 3, Protocol: 300},
	} {
		if _, err := fromPBConntrackFilter(r); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

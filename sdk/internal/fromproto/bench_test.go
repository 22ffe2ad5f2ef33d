package fromproto_test

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fromproto"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func benchBatch(n int) *flow.Batch {
	b := flow.NewBatch()
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(128 + i>>16&0x7f), byte(i >> 8), byte(i)})
		b.AddFlows(flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{flow.Output(uint32(1 + i%8))}})
	}
	return b
}

// BenchmarkBatchWire5000 is the SDK's per-batch wire cost: convert and
// marshal on the plugin side, unmarshal and convert on the host side.
func BenchmarkBatchWire5000(b *testing.B) {
	batch := benchBatch(5000)
	b.ReportAllocs()
	for b.Loop() {
		raw, err := proto.Marshal(toproto.Batch(batch))
		if err != nil {
			b.Fatal(err)
		}
		var m pb.Batch
		if err := proto.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
		if got := fromproto.Batch(&m); got.Len() != 5000 {
			b.Fatal(got.Len())
		}
	}
}

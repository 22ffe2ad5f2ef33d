package sdkhost

import (
	"context"
	"net/netip"

	"switchyard.dev/switchyard/sdk"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// ConntrackFlusher is implemented by a HostService that can remove
// conntrack entries (sdk.ConntrackFlusher); without it the call is
// refused as unimplemented.
type ConntrackFlusher interface {
	FlushConntrack(ctx context.Context, f sdk.ConntrackFilter) error
}

func (h *hostServer) FlushConntrack(ctx context.Context, r *pb.ConntrackFlushRequest) (*pb.Empty, error) {
	fl, ok := h.s.(ConntrackFlusher)
	if !ok {
		return h.UnimplementedHostServer.FlushConntrack(ctx, r)
	}
	f, err := fromPBConntrackFilter(r)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := fl.FlushConntrack(ctx, f); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

// fromPBConntrackFilter is the inverse of sdk's toPBConntrackFilter; an address
// of a length other than 4 or 16 bytes, a zone, protocol or port out of
// range is an error naming it.
func fromPBConntrackFilter(r *pb.ConntrackFlushRequest) (sdk.ConntrackFilter, error) {
	var errs []string
	t := func(dir string, p *pb.ConntrackTuple) sdk.ConntrackTuple {
		var out sdk.ConntrackTuple
		for _, a := range []struct {
			name string
			b    []byte
			to   *netip.Addr
		}{{"src", p.GetSrc(), &out.Src}, {"dst", p.GetDst(), &out.Dst}} {
			if len(a.b) == 0 {
				continue
			}
			ip, ok := netip.AddrFromSlice(a.b)
			if !ok {
				errs = append(errs, dir+" "+a.name+" is not an IPv4 or IPv6 address")
				continue
			}
			*a.to = ip.Unmap()
		}
		if p.GetSrcPort() > 0xffff || p.GetDstPort() > 0xffff {
			errs = append(errs, dir+" port out of range")
		}
		out.SrcPort, out.DstPort = uint16(p.GetSrcPort()), uint16(p.GetDstPort())
		return out
	}
	f := sdk.ConntrackFilter{Zone: uint16(r.GetZone()), Protocol: uint8(r.GetProtocol()), Orig: t("orig", r.GetOrig()), Reply: t("reply", r.GetReply())}
	if r.GetZone() > 0xffff {
		errs = append(errs, "zone out of range")
	}
	if r.GetProtocol() > 0xff {
		errs = append(errs, "protocol out of range")
	}
	if len(errs) > 0 {
		return f, &invalidFilter{errs}
	}
	return f, nil
}

type invalidFilter struct{ what []string }

func (e *invalidFilter) Error() string {
	s := "conntrack filter:"
	for _, w := range e.what {
		s += " " + w + ";"
	}
	return s
}
func (e *invalidFilter) Unwrap() error { return sdk.ErrInvalid }

package thin

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"switchyard.dev/switchyard/cni/cniwire"
)

// toResult builds a CNI result at the newest spec version from the agent's
// answer. It rejects malformed addresses rather than passing them on: a
// garbled result would only fail later, inside the runtime, with less
// context.
func toResult(r *cniwire.Result) (*current.Result, error) {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	for _, in := range r.Interfaces {
		res.Interfaces = append(res.Interfaces, &current.Interface{
			Name: in.Name, Mac: in.MAC, Sandbox: in.Sandbox, Mtu: int(in.MTU),
		})
	}
	for i, ipc := range r.IPs {
		ip, ipnet, err := net.ParseCIDR(ipc.Address)
		if err != nil {
			return nil, fmt.Errorf("agent result ips[%d]: address %q: %w", i, ipc.Address, err)
		}
		ipnet.IP = ip
		c := &current.IPConfig{Address: *ipnet}
		if ipc.Interface != nil {
			idx := int(*ipc.Interface)
			if idx < 0 || idx >= len(res.Interfaces) {
				return nil, fmt.Errorf("agent result ips[%d]: interface index %d out of range (%d interfaces)", i, idx, len(res.Interfaces))
			}
			c.Interface = current.Int(idx)
		}
		if gw := ipc.Gateway; gw != "" {
			if c.Gateway = net.ParseIP(gw); c.Gateway == nil {
				return nil, fmt.Errorf("agent result ips[%d]: gateway %q is not an IP", i, gw)
			}
		}
		res.IPs = append(res.IPs, c)
	}
	for i, rt := range r.Routes {
		_, dst, err := net.ParseCIDR(rt.Dst)
		if err != nil {
			return nil, fmt.Errorf("agent result routes[%d]: dst %q: %w", i, rt.Dst, err)
		}
		route := &types.Route{Dst: *dst}
		if gw := rt.GW; gw != "" {
			if route.GW = net.ParseIP(gw); route.GW == nil {
				return nil, fmt.Errorf("agent result routes[%d]: gw %q is not an IP", i, gw)
			}
		}
		res.Routes = append(res.Routes, route)
	}
	if d := r.DNS; d != nil {
		res.DNS = types.DNS{Nameservers: d.Nameservers, Domain: d.Domain, Search: d.Search, Options: d.Options}
	}
	return res, nil
}

// convert returns the agent's answer at the version the runtime asked for.
func convert(r *cniwire.Result, version string) (types.Result, error) {
	res, err := toResult(r)
	if err != nil {
		return nil, err
	}
	out, err := res.GetAsVersion(version)
	if err != nil {
		return nil, fmt.Errorf("converting the result to cniVersion %s: %w", version, err)
	}
	return out, nil
}

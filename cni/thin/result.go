package thin

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"switchyard.dev/switchyard/cni/cnipb"
)

// toResult builds a CNI result at the newest spec version from the agent's
// answer. It rejects malformed addresses rather than passing them on: a
// garbled result would only fail later, inside the runtime, with less
// context.
func toResult(r *cnipb.Result) (*current.Result, error) {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	for _, in := range r.GetInterfaces() {
		res.Interfaces = append(res.Interfaces, &current.Interface{
			Name: in.GetName(), Mac: in.GetMac(), Sandbox: in.GetSandbox(), Mtu: int(in.GetMtu()),
		})
	}
	for i, ipc := range r.GetIps() {
		ip, ipnet, err := net.ParseCIDR(ipc.GetAddress())
		if err != nil {
			return nil, fmt.Errorf("agent result ips[%d]: address %q: %w", i, ipc.GetAddress(), err)
		}
		ipnet.IP = ip
		c := &current.IPConfig{Address: *ipnet}
		if ipc.Interface != nil {
			idx := int(ipc.GetInterface())
			if idx < 0 || idx >= len(res.Interfaces) {
				return nil, fmt.Errorf("agent result ips[%d]: interface index %d out of range (%d interfaces)", i, idx, len(res.Interfaces))
			}
			c.Interface = current.Int(idx)
		}
		if gw := ipc.GetGateway(); gw != "" {
			if c.Gateway = net.ParseIP(gw); c.Gateway == nil {
				return nil, fmt.Errorf("agent result ips[%d]: gateway %q is not an IP", i, gw)
			}
		}
		res.IPs = append(res.IPs, c)
	}
	for i, rt := range r.GetRoutes() {
		_, dst, err := net.ParseCIDR(rt.GetDst())
		if err != nil {
			return nil, fmt.Errorf("agent result routes[%d]: dst %q: %w", i, rt.GetDst(), err)
		}
		route := &types.Route{Dst: *dst}
		if gw := rt.GetGw(); gw != "" {
			if route.GW = net.ParseIP(gw); route.GW == nil {
				return nil, fmt.Errorf("agent result routes[%d]: gw %q is not an IP", i, gw)
			}
		}
		res.Routes = append(res.Routes, route)
	}
	if d := r.GetDns(); d != nil {
		res.DNS = types.DNS{Nameservers: d.GetNameservers(), Domain: d.GetDomain(), Search: d.GetSearch(), Options: d.GetOptions()}
	}
	return res, nil
}

// convert returns the agent's answer at the version the runtime asked for.
func convert(r *cnipb.Result, version string) (types.Result, error) {
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

package thin

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"switchyard.dev/switchyard/cni/cniwire"
	"switchyard.dev/switchyard/cni/netconf"
)

// Plugin implements the skel callbacks. The zero value is not usable; use
// New.
type Plugin struct {
	stdout io.Writer
	send   func(ctx context.Context, socket string, req *cniwire.Request) (*cniwire.Response, error)
}

// New returns a Plugin that prints results to stdout and reaches the agent
// over the unix socket named in each network config.
func New(stdout io.Writer) *Plugin {
	return &Plugin{stdout: stdout, send: callUnix}
}

// Funcs returns the callbacks for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

func callUnix(ctx context.Context, socket string, req *cniwire.Request) (*cniwire.Response, error) {
	// Stat first: "no such socket" is the common case on a node whose agent
	// has not started, and it deserves its own message.
	if _, err := os.Stat(socket); err != nil {
		return nil, err
	}
	return cniwire.Call(ctx, socket, req)
}

// k8sArgs are the CNI_ARGS keys kubelet sets.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // name fixed by kubelet
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive
	K8S_POD_UID                types.UnmarshallableString //nolint:revive
}

// request builds the wire request. requirePod is false for DEL: a runtime
// cleaning up after a crash may not know the pod any more, and DEL must
// still release what the container holds.
func request(op string, args *skel.CmdArgs, conf *netconf.NetConf, requirePod bool) (*cniwire.Request, *types.Error) {
	var ka k8sArgs
	ka.IgnoreUnknown = true
	if err := types.LoadArgs(args.Args, &ka); err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_ARGS %q cannot be parsed: %v", args.Args, err),
			"CNI_ARGS must be KEY=VALUE pairs separated by ';', e.g. K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0")
	}
	if requirePod && (ka.K8S_POD_NAMESPACE == "" || ka.K8S_POD_NAME == "") {
		return nil, types.NewError(ErrMissingPodArgs,
			"CNI_ARGS must carry K8S_POD_NAMESPACE and K8S_POD_NAME",
			"switchyard attaches Kubernetes pods only; the container runtime sets these keys when kubelet asks for a pod sandbox")
	}
	return &cniwire.Request{
		Op:          op,
		ContainerID: args.ContainerID,
		Netns:       args.Netns,
		IfName:      args.IfName,
		CNIVersion:  conf.CNIVersion,
		NetworkName: conf.Name,
		Pod: cniwire.PodRef{
			Namespace: string(ka.K8S_POD_NAMESPACE),
			Name:      string(ka.K8S_POD_NAME),
			UID:       string(ka.K8S_POD_UID),
		},
		RawArgs: args.Args,
		NetConf: args.StdinData,
	}, nil
}

// call parses the config, builds the request with build, and sends it to
// the agent under the config's timeout. Every step fails as a CNI error.
func (p *Plugin) call(args *skel.CmdArgs, op string, build func(*netconf.NetConf) (*cniwire.Request, *types.Error)) (*cniwire.Response, *netconf.NetConf, error) {
	conf, err := netconf.Parse(args.StdinData)
	if err != nil {
		return nil, nil, configError(err)
	}
	req, cerr := build(conf)
	if cerr != nil {
		return nil, nil, cerr
	}
	ctx, cancel := context.WithTimeout(context.Background(), conf.Timeout())
	defer cancel()
	resp, err := p.send(ctx, conf.Socket, req)
	if err != nil {
		return nil, nil, transportError(conf, op, err)
	}
	if resp.Error != nil {
		return nil, nil, fromWire(resp.Error)
	}
	return resp, conf, nil
}

// Add asks the agent to attach the container and prints the result at the
// requested version.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	resp, conf, err := p.call(args, cniwire.OpAdd, func(conf *netconf.NetConf) (*cniwire.Request, *types.Error) {
		return request(cniwire.OpAdd, args, conf, true)
	})
	if err != nil {
		return err
	}
	if resp.Result == nil {
		return types.NewError(types.ErrInternal, "the switchyard agent returned an unusable result", "it answered the ADD with neither a result nor an error")
	}
	res, err := convert(resp.Result, conf.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrInternal, "the switchyard agent returned an unusable result", err.Error())
	}
	if err := res.PrintTo(p.stdout); err != nil {
		return types.NewError(types.ErrIOFailure, "writing the result to stdout failed", err.Error())
	}
	return nil
}

// Del asks the agent to detach the container. The agent treats an unknown
// container or a vanished netns as success.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	_, _, err := p.call(args, cniwire.OpDel, func(conf *netconf.NetConf) (*cniwire.Request, *types.Error) {
		return request(cniwire.OpDel, args, conf, false)
	})
	return err
}

// Check asks the agent to verify the attachment.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	_, _, err := p.call(args, cniwire.OpCheck, func(conf *netconf.NetConf) (*cniwire.Request, *types.Error) {
		return request(cniwire.OpCheck, args, conf, true)
	})
	return err
}

// Status reports whether the agent can serve ADDs. An agent that cannot be
// reached is "plugin not available" (50) rather than try-again-later: that
// is what STATUS is for.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	_, _, err := p.call(args, cniwire.OpStatus, func(conf *netconf.NetConf) (*cniwire.Request, *types.Error) {
		return &cniwire.Request{Op: cniwire.OpStatus, CNIVersion: conf.CNIVersion, NetConf: args.StdinData}, nil
	})
	if e := asCNIError(err); e != nil && e.Code == types.ErrTryAgainLater {
		e.Code = types.ErrPluginNotAvailable
		return e
	}
	return err
}

// GC passes the runtime's list of live attachments to the agent, which
// releases everything else.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	_, _, err := p.call(args, cniwire.OpGC, func(conf *netconf.NetConf) (*cniwire.Request, *types.Error) {
		req := &cniwire.Request{Op: cniwire.OpGC, CNIVersion: conf.CNIVersion, NetConf: args.StdinData}
		for _, a := range conf.ValidAttachments {
			req.ValidAttachments = append(req.ValidAttachments, cniwire.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
		}
		return req, nil
	})
	return err
}

package thin

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/netconf"
)

// Plugin implements the skel callbacks. The zero value is not usable; use
// New.
type Plugin struct {
	stdout io.Writer
	dial   func(socket string) (cnipb.CNIClient, io.Closer, error)
}

// New returns a Plugin that prints results to stdout and reaches the agent
// over the unix socket named in each network config.
func New(stdout io.Writer) *Plugin {
	return &Plugin{stdout: stdout, dial: dialUnix}
}

// Funcs returns the callbacks for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

func dialUnix(socket string) (cnipb.CNIClient, io.Closer, error) {
	// Stat first: "no such socket" is the common case on a node whose agent
	// has not started, and it deserves its own message.
	if _, err := os.Stat(socket); err != nil {
		return nil, nil, err
	}
	cc, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return cnipb.NewCNIClient(cc), cc, nil
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
func request(args *skel.CmdArgs, conf *netconf.NetConf, requirePod bool) (*cnipb.CmdRequest, *types.Error) {
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
	return &cnipb.CmdRequest{
		ContainerId: args.ContainerID,
		Netns:       args.Netns,
		Ifname:      args.IfName,
		CniVersion:  conf.CNIVersion,
		NetworkName: conf.Name,
		Pod: &cnipb.PodRef{
			Namespace: string(ka.K8S_POD_NAMESPACE),
			Name:      string(ka.K8S_POD_NAME),
			Uid:       string(ka.K8S_POD_UID),
		},
		RawArgs: args.Args,
		NetConf: args.StdinData,
	}, nil
}

// call parses the config, dials the agent and runs fn under the config's
// timeout. All three steps fail as CNI errors.
func (p *Plugin) call(args *skel.CmdArgs, op string, fn func(context.Context, cnipb.CNIClient, *netconf.NetConf) (*cnipb.Error, error)) error {
	conf, err := netconf.Parse(args.StdinData)
	if err != nil {
		return configError(err)
	}
	client, closer, err := p.dial(conf.Socket)
	if err != nil {
		return transportError(conf, op, err)
	}
	defer closer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), conf.Timeout())
	defer cancel()
	perr, err := fn(ctx, client, conf)
	if err != nil {
		if e, ok := err.(*types.Error); ok {
			return e
		}
		return transportError(conf, op, err)
	}
	if perr != nil {
		return fromProto(perr)
	}
	return nil
}

// Add asks the agent to attach the container and prints the result at the
// requested version.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	return p.call(args, "ADD", func(ctx context.Context, c cnipb.CNIClient, conf *netconf.NetConf) (*cnipb.Error, error) {
		req, cerr := request(args, conf, true)
		if cerr != nil {
			return nil, cerr
		}
		resp, err := c.Add(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.GetError() != nil {
			return resp.GetError(), nil
		}
		res, err := convert(resp.GetResult(), conf.CNIVersion)
		if err != nil {
			return nil, types.NewError(types.ErrInternal, "the switchyard agent returned an unusable result", err.Error())
		}
		if err := res.PrintTo(p.stdout); err != nil {
			return nil, types.NewError(types.ErrIOFailure, "writing the result to stdout failed", err.Error())
		}
		return nil, nil
	})
}

// Del asks the agent to detach the container. The agent treats an unknown
// container or a vanished netns as success.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	return p.call(args, "DEL", func(ctx context.Context, c cnipb.CNIClient, conf *netconf.NetConf) (*cnipb.Error, error) {
		req, cerr := request(args, conf, false)
		if cerr != nil {
			return nil, cerr
		}
		resp, err := c.Del(ctx, req)
		return resp.GetError(), err
	})
}

// Check asks the agent to verify the attachment.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	return p.call(args, "CHECK", func(ctx context.Context, c cnipb.CNIClient, conf *netconf.NetConf) (*cnipb.Error, error) {
		req, cerr := request(args, conf, true)
		if cerr != nil {
			return nil, cerr
		}
		resp, err := c.Check(ctx, req)
		return resp.GetError(), err
	})
}

// Status reports whether the agent can serve ADDs. An agent that cannot be
// reached is "plugin not available" (50) rather than try-again-later: that
// is what STATUS is for.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	err := p.call(args, "STATUS", func(ctx context.Context, c cnipb.CNIClient, conf *netconf.NetConf) (*cnipb.Error, error) {
		resp, err := c.Status(ctx, &cnipb.StatusRequest{CniVersion: conf.CNIVersion, NetConf: args.StdinData})
		return resp.GetError(), err
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
	return p.call(args, "GC", func(ctx context.Context, c cnipb.CNIClient, conf *netconf.NetConf) (*cnipb.Error, error) {
		req := &cnipb.GCRequest{CniVersion: conf.CNIVersion, NetConf: args.StdinData}
		for _, a := range conf.ValidAttachments {
			req.ValidAttachments = append(req.ValidAttachments, &cnipb.Attachment{ContainerId: a.ContainerID, Ifname: a.IfName})
		}
		resp, err := c.GC(ctx, req)
		return resp.GetError(), err
	})
}

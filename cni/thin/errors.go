package thin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"

	"switchyard.dev/switchyard/cni/cniwire"
	"switchyard.dev/switchyard/cni/netconf"
)

// ErrMissingPodArgs: CNI_ARGS lacks the K8S_POD_* keys. Codes the agent
// sends (IPAM exhausted, interface failure, ...) are in package cnierr.
const ErrMissingPodArgs = types.ErrInvalidEnvironmentVariables

// configError wraps a net conf parse failure as CNI code 7.
func configError(err error) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, err.Error(),
		"fix the switchyard entry of the conflist in the CNI config directory (normally written by the agent's install step)")
}

// fromWire turns an error the agent reported into a CNI error, keeping
// the agent's code and wording: the agent knows what went wrong.
func fromWire(e *cniwire.Error) *types.Error {
	code := e.Code
	if code == 0 {
		code = types.ErrInternal
	}
	return types.NewError(code, e.Msg, e.Details)
}

// transportError classifies a failed call to the agent. Anything that means
// "nobody is answering" becomes try-again-later, so kubelet retries instead
// of failing the pod.
func transportError(conf *netconf.NetConf, op string, err error) *types.Error {
	sock := conf.Socket
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("switchyard agent did not answer %s within %s", op, conf.Timeout()),
			"the agent on this node is overloaded or stuck; check its logs (kubectl -n kube-system logs ds/switchyard-agent); the runtime will retry")
	}
	// No socket, nobody listening on it, or the agent gone mid-call: it is
	// not running (now), and the runtime should retry.
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, cniwire.ErrNoAnswer) {
		return notRunning(sock, err)
	}
	return types.NewError(types.ErrInternal, fmt.Sprintf("calling the switchyard agent for %s failed", op), err.Error())
}

func notRunning(sock string, err error) *types.Error {
	return types.NewError(types.ErrTryAgainLater,
		fmt.Sprintf("switchyard agent is not running: cannot reach %s", sock),
		fmt.Sprintf("start the switchyard-agent pod on this node (or fix \"socket\" in the network config); the runtime will retry (%v)", err))
}

// asCNIError returns err as a *types.Error, wrapping anything else as an
// internal error so the runtime always gets the spec's JSON shape.
func asCNIError(err error) *types.Error {
	if err == nil {
		return nil
	}
	var e *types.Error
	if errors.As(err, &e) {
		return e
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}

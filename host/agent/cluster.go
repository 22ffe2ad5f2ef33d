package agent

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"switchyard.dev/switchyard/host/kube"
	"switchyard.dev/switchyard/sdk"
)

// preflightRetry is how often a failed preflight is tried (and logged) again.
const preflightRetry = 5 * time.Second

// JoinCluster connects the agent to the apiserver: it checks the
// credentials (retrying, and keeping the reason as what the agent waits
// for), then runs the one Node informer whose own-Node updates become the
// node facts and whose other nodes become node events. It returns at once;
// stop ends the informer.
func (a *Agent) JoinCluster(ctx context.Context, acc *kube.Access) (stop func(), err error) {
	client, err := kubernetes.NewForConfig(acc.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.joinCluster(ctx, client, acc)
	}()
	return func() { cancel(); <-done }, nil
}

func (a *Agent) joinCluster(ctx context.Context, client kubernetes.Interface, acc *kube.Access) {
	name := a.NodeFacts().Name
	for {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := kube.Preflight(pctx, client, acc.Config.Host, name)
		cancel()
		if err == nil || errors.Is(err, kube.ErrNoNode) {
			if err != nil {
				a.NodeFactsProblem(err.Error())
			}
			break
		}
		a.NodeFactsProblem(err.Error())
		a.log.Error("cannot use the apiserver", "apiserver", acc.Config.Host, "credentials", acc.Source, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(preflightRetry):
		}
	}
	w, err := kube.StartWatch(client, name, &nodeHandler{a: a, ctx: ctx}, a.log)
	if err != nil {
		a.NodeFactsProblem("starting the Node informer: " + err.Error())
		return
	}
	a.log.Info("watching Nodes", "apiserver", acc.Config.Host, "credentials", acc.Source)
	<-ctx.Done()
	w.Stop()
}

// nodeHandler turns the informer's calls into facts and node events.
type nodeHandler struct {
	a   *Agent
	ctx context.Context
}

func (h *nodeHandler) OwnNode(n *corev1.Node) {
	a := h.a
	if n == nil {
		a.NodeFactsProblem("this node's Node object was deleted; the datapath stays as it is until it is back")
		return
	}
	a.pmu.Lock()
	cfg := a.cfg
	a.pmu.Unlock()
	obs, err := kube.Observe(n)
	if err != nil {
		a.NodeFactsProblem(err.Error())
		return
	}
	f, warn, err := kube.Facts(BaseFacts(cfg), obs, cfg.Node, kube.Uplink)
	if err != nil {
		a.NodeFactsProblem(err.Error())
		return
	}
	if warn != "" {
		a.log.Warn(warn)
	}
	a.SetNodeFacts(h.ctx, f)
}

func (h *nodeHandler) NodeEvent(kind sdk.NodeEventKind, info sdk.NodeInfo) {
	h.a.ObserveNode(h.ctx, kind, info)
}

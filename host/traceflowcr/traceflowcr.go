package traceflowcr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
)

// Tracer runs one node's part of a trace (agent.Agent.Trace).
type Tracer interface {
	Trace(ctx context.Context, req agent.TraceRequest) (*agent.TraceResult, error)
}

// Server handles the Traceflows that concern node Node.
type Server struct {
	Node   string
	Tracer Tracer
	Kube   kubernetes.Interface
	Dyn    dynamic.Interface
	Log    *slog.Logger
	// Resync is how often every object is looked at again, which is
	// also how late a timed-out trace is failed; 0 means 2 s.
	Resync time.Duration
	Now    func() time.Time
}

// Run watches Traceflows until ctx ends.
func (s *Server) Run(ctx context.Context) {
	if s.Resync == 0 {
		s.Resync = 2 * time.Second
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(s.Dyn, s.Resync)
	inf := f.ForResource(crdv1.TraceflowsResource).Informer()
	// One worker: traces of one node run one at a time, as yardctl's do.
	work := make(chan *unstructured.Unstructured, 64)
	enqueue := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			select {
			case work <- u:
			default: // the next resync brings it back
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) },
	})
	f.Start(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			f.Shutdown()
			return
		case u := <-work:
			var tf crdv1.Traceflow
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tf); err != nil {
				s.Log.Warn("traceflow: unreadable object", "traceflow", u.GetName(), "error", err)
				continue
			}
			if err := s.handle(ctx, &tf); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
				s.Log.Warn("traceflow: writing status", "traceflow", tf.Name, "error", err)
			}
		}
	}
}

// handle does this node's part of tf, if any.
func (s *Server) handle(ctx context.Context, tf *crdv1.Traceflow) error {
	st := &tf.Status
	switch {
	case st.Phase == crdv1.TraceflowSucceeded || st.Phase == crdv1.TraceflowFailed:
		return nil
	case st.Phase == "":
		return s.start(ctx, tf)
	case st.Next != nil && st.Next.Node == s.Node:
		var req agent.TraceRequest
		if err := json.Unmarshal([]byte(st.Next.Request), &req); err != nil {
			return s.fail(ctx, tf, fmt.Sprintf("node %s could not read the hand-off: %v", s.Node, err))
		}
		req.Inject = true // every node confirms its part with a marked packet
		return s.continueOn(ctx, tf, req)
	case len(st.Nodes) > 0 && st.Nodes[0].Node == s.Node && st.StartTime != nil &&
		// startTime comes back from the apiserver in whole seconds
		// (truncated), so the trace began up to a second after it:
		// counting from it alone failed traces before their timeout.
		s.Now().Sub(st.StartTime.Time) > time.Duration(timeout(tf))*time.Second+time.Second:
		waiting := "the next node"
		if st.Next != nil {
			waiting = "node " + st.Next.Node
		}
		return s.fail(ctx, tf, fmt.Sprintf("%s did not continue the trace within %ds (is its agent running and current?)", waiting, timeout(tf)))
	}
	return nil
}

func timeout(tf *crdv1.Traceflow) int32 {
	if tf.Spec.TimeoutSeconds > 0 {
		return tf.Spec.TimeoutSeconds
	}
	return 20
}

// start begins the trace when the source pod runs on this node. A source
// that does not exist fails the trace on whichever agent sees it first.
func (s *Server) start(ctx context.Context, tf *crdv1.Traceflow) error {
	ns, name, ok := strings.Cut(tf.Spec.Source, "/")
	if !ok {
		return s.fail(ctx, tf, fmt.Sprintf("source %q is not namespace/name", tf.Spec.Source))
	}
	pod, err := s.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s.fail(ctx, tf, fmt.Sprintf("source pod %s does not exist", tf.Spec.Source))
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != s.Node {
		return nil
	}
	dst, err := s.destination(ctx, tf)
	if err != nil {
		return s.fail(ctx, tf, err.Error())
	}
	now := metav1.NewTime(s.Now())
	tf.Status.StartTime = &now
	return s.continueOn(ctx, tf, agent.TraceRequest{SourcePod: tf.Spec.Source, DstIP: dst,
		Protocol: tf.Spec.Protocol, DstPort: uint16(tf.Spec.Port), Inject: true})
}

// destination is the address the packet is sent to.
func (s *Server) destination(ctx context.Context, tf *crdv1.Traceflow) (string, error) {
	sp := tf.Spec
	switch {
	case sp.DestinationIP != "":
		if ip := net.ParseIP(sp.DestinationIP); ip == nil || ip.To4() == nil {
			return "", fmt.Errorf("destinationIP %q is not an IPv4 address", sp.DestinationIP)
		}
		return sp.DestinationIP, nil
	case sp.DestinationPod != "":
		ns, name, _ := strings.Cut(sp.DestinationPod, "/")
		p, err := s.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("destination pod %s: %w", sp.DestinationPod, err)
		}
		if p.Status.PodIP == "" {
			return "", fmt.Errorf("destination pod %s has no IP yet", sp.DestinationPod)
		}
		return p.Status.PodIP, nil
	case sp.DestinationService != "":
		ns, name, _ := strings.Cut(sp.DestinationService, "/")
		svc, err := s.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("destination Service %s: %w", sp.DestinationService, err)
		}
		if net.ParseIP(svc.Spec.ClusterIP) == nil {
			return "", fmt.Errorf("destination Service %s has no cluster IP (headless?): trace to one of its pods instead", sp.DestinationService)
		}
		return svc.Spec.ClusterIP, nil
	}
	return "", errors.New("no destination: set destinationIP, destinationPod or destinationService")
}

// continueOn runs req here, appends the result and hands off or finishes.
func (s *Server) continueOn(ctx context.Context, tf *crdv1.Traceflow, req agent.TraceRequest) error {
	log := s.Log.With("traceflow", tf.Name, "node", s.Node)
	res, err := s.Tracer.Trace(ctx, req)
	if err != nil {
		return s.fail(ctx, tf, fmt.Sprintf("node %s: %v", s.Node, err))
	}
	st := &tf.Status
	st.Nodes = append(st.Nodes, nodeStatus(res))
	st.Next, st.Outcome = nil, agent.Outcome(res.Verdicts)
	st.Phase, st.Reason = crdv1.TraceflowSucceeded, ""
	for _, v := range res.Verdicts {
		if v.Kind != agent.VerdictTunnel || v.Next == nil {
			continue
		}
		if v.Node == "" {
			st.Reason = fmt.Sprintf("the packet went through the tunnel to %s, which is no known node", v.TunnelTo)
			break
		}
		b, err := json.Marshal(v.Next)
		if err != nil {
			return err
		}
		st.Phase, st.Next = crdv1.TraceflowRunning, &crdv1.TraceflowHandoff{Node: v.Node, Request: string(b)}
		break
	}
	log.Info("traceflow: traced here", "outcome", st.Outcome, "phase", st.Phase, "hops", len(res.Hops))
	return s.write(ctx, tf)
}

func (s *Server) fail(ctx context.Context, tf *crdv1.Traceflow, reason string) error {
	s.Log.Info("traceflow failed", "traceflow", tf.Name, "node", s.Node, "reason", reason)
	tf.Status.Phase, tf.Status.Reason, tf.Status.Next = crdv1.TraceflowFailed, reason, nil
	return s.write(ctx, tf)
}

func (s *Server) write(ctx context.Context, tf *crdv1.Traceflow) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tf)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(crdv1.SchemeGroupVersion.String())
	u.SetKind("Traceflow")
	_, err = s.Dyn.Resource(crdv1.TraceflowsResource).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

func nodeStatus(r *agent.TraceResult) crdv1.TraceflowNode {
	n := crdv1.TraceflowNode{Node: r.Node, Micros: int64(r.Millis * 1000), DatapathConfirmed: r.Datapath != nil && r.Datapath.Confirmed}
	for _, h := range r.Hops {
		n.Hops = append(n.Hops, crdv1.TraceflowHop{Table: h.Table, TableOwner: h.TableOwner, Plugin: h.Plugin, Priority: int32(h.Priority),
			Flow: h.Flow, Description: h.Description, Notes: h.Notes, End: h.End})
	}
	for _, v := range r.Verdicts {
		n.Verdicts = append(n.Verdicts, crdv1.TraceflowVerdict{Kind: v.Kind, Pod: v.Pod, Node: v.Node, Plugin: v.Plugin,
			Table: v.Table, Description: v.Description})
	}
	return n
}

package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"switchyard.dev/switchyard/sdk/internal/wire"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// featureServer adapts a Feature to the wire. Every method is the same
// three steps: convert the request, call the author's method, convert back.
type featureServer struct {
	pb.UnimplementedFeatureServer
	f      Feature
	broker *plugin.GRPCBroker
	logger *slog.Logger

	mu   sync.Mutex
	host *hostClient
}

var _ pb.FeatureServer = (*featureServer)(nil)

func toStatus(err error) error {
	var ce *CNIError
	if errors.As(err, &ce) {
		return wire.CNIStatus(err.Error(), ce.Code, ce.Msg, ce.Details)
	}
	return wire.ToStatus(err, Sentinels())
}

func unimplemented(c Capability) error {
	return status.Errorf(codes.Unimplemented, "plugin does not have the %q capability", c)
}

func (s *featureServer) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	var resp DescribeResponse
	if err := s.f.Describe(ctx, DescribeRequest{Config: req.GetConfig()}, &resp); err != nil {
		return nil, toStatus(fmt.Errorf("describe: %w", err))
	}
	return toPBDescribeResponse(&resp, Capabilities(s.f)), nil
}

func (s *featureServer) Start(ctx context.Context, req *pb.StartRequest) (*pb.StartResponse, error) {
	conn, err := s.broker.DialWithOptions(req.GetHostBrokerId(), wire.DialOptions()...)
	if err != nil {
		return nil, toStatus(fmt.Errorf("connect back to the host: %w", err))
	}
	node, err := fromPBNodeFacts(req.GetNode())
	if err != nil {
		return nil, toStatus(err)
	}
	asg := fromPBAssignment(req.GetAssignment())
	h := &hostClient{c: pb.NewHostClient(conn), logger: s.logger}
	s.mu.Lock()
	s.host = h
	s.mu.Unlock()
	s.logger.Debug("started by host", "cookie_prefix", asg.CookiePrefix, "round", asg.Round, "tables", len(asg.Tables))
	cl := Cluster{
		APIServer:  fromPBEndpoint(req.GetCluster().GetApiserver()),
		Controller: fromPBEndpoint(req.GetCluster().GetController()),
		Tokens:     &cachedTokens{fetch: h.token, now: time.Now},
	}
	var atts []PodInterface
	for _, a := range req.GetAttachments() {
		pi, err := fromPBPodInterface(a)
		if err != nil {
			return nil, toStatus(fmt.Errorf("attachment %s/%s: %w", a.GetContainerId(), a.GetIfName(), err))
		}
		atts = append(atts, pi)
	}
	err = s.f.Start(ctx, StartRequest{Host: h, Assignment: asg, Node: node, Config: req.GetConfig(), Cluster: cl, Attachments: atts}, &StartResponse{})
	if err != nil {
		return nil, toStatus(fmt.Errorf("start: %w", err))
	}
	return &pb.StartResponse{}, nil
}

func (s *featureServer) Stop(ctx context.Context, req *pb.StopRequest) (*pb.StopResponse, error) {
	if st, ok := s.f.(Stopper); ok {
		if err := st.Stop(ctx, StopRequest{Unload: req.GetUnload()}, &StopResponse{}); err != nil {
			return nil, toStatus(fmt.Errorf("stop: %w", err))
		}
	}
	return &pb.StopResponse{}, nil
}

func (s *featureServer) CNIAdd(ctx context.Context, req *pb.CNIRequest) (*pb.CNIAddResponse, error) {
	h, ok := s.f.(CNIHandler)
	if !ok {
		return nil, unimplemented(CapCNI)
	}
	var resp CNIAddResponse
	if err := h.CNIAdd(ctx, CNIAddRequest{Args: fromPBCNIArgs(req)}, &resp); err != nil {
		return nil, toStatus(err)
	}
	return toPBCNIAddResponse(&resp), nil
}

func (s *featureServer) CNIDel(ctx context.Context, req *pb.CNIRequest) (*pb.Empty, error) {
	h, ok := s.f.(CNIHandler)
	if !ok {
		return nil, unimplemented(CapCNI)
	}
	if err := h.CNIDel(ctx, CNIDelRequest{Args: fromPBCNIArgs(req)}, &CNIDelResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *featureServer) CNIGC(ctx context.Context, req *pb.CNIGCRequest) (*pb.CNIGCResponse, error) {
	h, ok := s.f.(CNIGarbageCollector)
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "plugin does not collect CNI garbage (sdk.CNIGarbageCollector)")
	}
	r := CNIGCRequest{NetConf: req.GetNetConf()}
	for _, a := range req.GetValid() {
		r.Valid = append(r.Valid, CNIAttachment{ContainerID: a.GetContainerId(), IfName: a.GetIfName()})
	}
	var resp CNIGCResponse
	if err := h.CNIGC(ctx, r, &resp); err != nil {
		return nil, toStatus(err)
	}
	return &pb.CNIGCResponse{Removed: uint32(resp.Removed)}, nil
}

func (s *featureServer) CNICheck(ctx context.Context, req *pb.CNIRequest) (*pb.Empty, error) {
	h, ok := s.f.(CNIHandler)
	if !ok {
		return nil, unimplemented(CapCNI)
	}
	if err := h.CNICheck(ctx, CNICheckRequest{Args: fromPBCNIArgs(req)}, &CNICheckResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *featureServer) PodInterfaceEvent(ctx context.Context, req *pb.PodInterfaceEventRequest) (*pb.Empty, error) {
	h, ok := s.f.(PodInterfaceSubscriber)
	if !ok {
		return nil, unimplemented(CapPodInterface)
	}
	r, err := fromPBPodInterfaceEvent(req)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := h.PodInterfaceEvent(ctx, r, &PodInterfaceEventResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *featureServer) PacketIn(ctx context.Context, req *pb.PacketInRequest) (*pb.Empty, error) {
	h, ok := s.f.(PacketInHandler)
	if !ok {
		return nil, unimplemented(CapPacketIn)
	}
	if err := h.PacketIn(ctx, fromPBPacketIn(req), &PacketInResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *featureServer) NodeEvent(ctx context.Context, req *pb.NodeEventRequest) (*pb.Empty, error) {
	h, ok := s.f.(NodeEventSubscriber)
	if !ok {
		return nil, unimplemented(CapNodeEvents)
	}
	r, err := fromPBNodeEvent(req)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := h.NodeEvent(ctx, r, &NodeEventResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *featureServer) NodeFactsChanged(ctx context.Context, req *pb.NodeFactsChangedRequest) (*pb.Empty, error) {
	h, ok := s.f.(NodeFactsSubscriber)
	if !ok {
		return nil, unimplemented(CapNodeFacts)
	}
	r, err := fromPBNodeFactsChanged(req)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := h.NodeFactsChanged(ctx, r, &NodeFactsChangedResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (s *featureServer) Metrics(ctx context.Context, _ *pb.Empty) (*pb.MetricsResponse, error) {
	h, ok := s.f.(MetricsReporter)
	if !ok {
		return nil, unimplemented(CapMetrics)
	}
	var resp MetricsResponse
	if err := h.Metrics(ctx, MetricsRequest{}, &resp); err != nil {
		return nil, toStatus(err)
	}
	out := &pb.MetricsResponse{Metrics: make([]*pb.Metric, 0, len(resp.Metrics))}
	for _, m := range resp.Metrics {
		out.Metrics = append(out.Metrics, &pb.Metric{Name: m.Name, Help: m.Help, Kind: uint32(m.Kind), Labels: m.Labels, Value: m.Value})
	}
	return out, nil
}

func (s *featureServer) DescribeFlow(ctx context.Context, req *pb.DescribeFlowRequest) (*pb.DescribeFlowResponse, error) {
	h, ok := s.f.(FlowDescriber)
	if !ok {
		return nil, unimplemented(CapDescribeFlows)
	}
	var resp DescribeFlowResponse
	r := DescribeFlowRequest{Table: req.GetTable(), Priority: uint16(req.GetPriority()), Match: req.GetMatch(), Tag: req.GetTag()}
	if err := h.DescribeFlow(ctx, r, &resp); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DescribeFlowResponse{Description: resp.Description}, nil
}

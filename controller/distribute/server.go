package distribute

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
)

// Server implements the PolicyDistribution gRPC service.
type Server struct {
	apiv1.UnimplementedPolicyDistributionServer

	Hub         *Hub
	Auth        Authenticator
	Realization *Realization
	// NodeKnown, if set, refuses nodes that are not registered Node objects.
	NodeKnown func(name string) bool
	// Ready, if set, holds watches until it is closed: the controller's
	// initial computation is done.
	Ready <-chan struct{}
	Log   *slog.Logger
}

var _ apiv1.PolicyDistributionServer = (*Server)(nil)

// Register adds the service to a gRPC server.
func (s *Server) Register(g *grpc.Server) { apiv1.RegisterPolicyDistributionServer(g, s) }

// authorize authenticates the caller and checks it may act for node.
func (s *Server) authorize(ctx context.Context, node string) error {
	if node == "" {
		return status.Error(codes.InvalidArgument, "node_name is empty: set it to the name of the calling node")
	}
	var token string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if t, ok := strings.CutPrefix(v, "Bearer "); ok {
				token = t
			}
		}
	}
	id, err := s.Auth.Authenticate(ctx, token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, ErrForbidden):
		return status.Error(codes.PermissionDenied, err.Error())
	case err != nil:
		return status.Errorf(codes.Unavailable, "cannot authenticate now: %v", err)
	}
	if id.Node != node {
		s.log().Warn("node asked for another node's span", "user", id.User, "tokenNode", id.Node, "node", node)
		return status.Errorf(codes.PermissionDenied, "token of %s is bound to node %q and may not act for node %q", id.User, id.Node, node)
	}
	if s.Ready != nil {
		// The Node check needs the synced informers.
		select {
		case <-s.Ready:
		case <-ctx.Done():
			return status.Error(codes.Unavailable, "the controller has not finished its initial computation")
		}
	}
	if s.NodeKnown != nil && !s.NodeKnown(node) {
		return status.Errorf(codes.PermissionDenied, "node %q is not a registered Node", node)
	}
	return nil
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Watch implements PolicyDistributionServer.
func (s *Server) Watch(req *apiv1.WatchRequest, stream grpc.ServerStreamingServer[apiv1.WatchEvent]) error {
	if err := s.authorize(stream.Context(), req.GetNodeName()); err != nil {
		return err
	}
	err := s.Hub.Serve(stream.Context(), req.GetNodeName(), req.GetResumeEpoch(), req.GetResumeVersion(), stream.Send)
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "watch ended")
	}
	return err
}

// ReportRealization implements PolicyDistributionServer.
func (s *Server) ReportRealization(ctx context.Context, req *apiv1.RealizationReport) (*apiv1.RealizationAck, error) {
	if err := s.authorize(ctx, req.GetNodeName()); err != nil {
		return nil, err
	}
	m := make(map[string]int64, len(req.GetPolicies()))
	for _, p := range req.GetPolicies() {
		m[p.GetUid()] = p.GetGeneration()
	}
	s.Realization.Report(req.GetNodeName(), m)
	return &apiv1.RealizationAck{}, nil
}

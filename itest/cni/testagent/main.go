// Command testagent is the CNI suite's stand-in for the CNI wiring of
// switchyard-agent while the agent does not serve CNI itself. Everything in
// it is real: the agent core (arbitration, flow store, OpenFlow, OVSDB) from
// host/agent, the podnet plugin process launched over the SDK wire, the
// interface store and the CNI server. Only the glue is local: it launches
// the plugin named "podnet" itself and hands the CNI server its handle.
//
//	testagent --config agent.yaml
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/cniserver"
	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := pflag.NewFlagSet("testagent", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	cfg, err := config.Load("", fs)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", cfg.NodeName)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var spec *config.Plugin
	for i := range cfg.Plugins {
		if cfg.Plugins[i].Name == "podnet" {
			spec = &cfg.Plugins[i]
		}
	}
	if spec == nil {
		return errors.New("config has no plugin named podnet")
	}
	lim := cfg.EffectiveLimits(*spec)
	others := cfg.Plugins[:0:0]
	for _, p := range cfg.Plugins {
		if p.Name != "podnet" {
			others = append(others, p)
		}
	}
	cfg.Plugins = others

	// The interface store lives in the configured run dir and survives a
	// restart. The agent core gets a fresh dir per start: it would treat
	// the locally registered podnet in a persisted layout as a plugin no
	// longer enabled and remove it; a fresh layout assigns the same tables.
	storeDir := cfg.RunDir
	cfg.RunDir = filepath.Join(storeDir, fmt.Sprintf("agent-%d", os.Getpid()))

	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sw, db, err := agent.Connect(dctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	defer sw.Close()
	a, err := agent.New(cfg, sw, db, log)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	defer a.Stop()

	p, err := sdkhost.Launch(sdkhost.Config{Name: "podnet", Path: spec.Path, Args: spec.Args, Logger: log})
	if err != nil {
		return err
	}
	defer p.Kill()
	desc, _, err := p.Describe(dctx)
	if err != nil {
		return err
	}
	asg, err := a.RegisterLocal(dctx, "podnet", desc)
	if err != nil {
		return err
	}
	node := sdk.NodeFacts{Name: cfg.NodeName, MTU: cfg.Node.MTU, Bridge: cfg.Bridge.Name, DatapathType: cfg.Bridge.DatapathType}
	for _, s := range cfg.Node.PodCIDRs {
		pr, err := netipParse(s)
		if err != nil {
			return err
		}
		node.PodCIDRs = append(node.PodCIDRs, pr)
	}
	svc := &service{a: a, db: db, lim: lim}
	if err := p.Start(ctx, sdkhost.StartArgs{Assignment: asg, Node: node, Config: spec.Config, Service: svc}); err != nil {
		return err
	}

	handler := cniserver.FromPlugin(p)
	cni, err := cniserver.StartNode(ctx, cniserver.NodeOptions{
		SocketDir: cfg.SocketDir, StateDir: storeDir, Ports: portView{db}, Logger: log,
		Handler: func() (sdk.CNIHandler, bool) { return handler, !p.Exited() },
	})
	if err != nil {
		return err
	}
	log.Info("testagent ready")
	<-ctx.Done()
	cni.Stop(5 * time.Second)
	stopCtx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer c2()
	_ = p.Stop(stopCtx)
	return nil
}

// service is podnet's Host, backed by the agent core and OVSDB.
type service struct {
	a   *agent.Agent
	db  *ovsdb.Client
	lim config.Limits
}

var _ sdkhost.HostService = (*service)(nil)

func (s *service) Apply(ctx context.Context, b *flow.Batch) error {
	return s.a.Apply(ctx, "podnet", b, s.lim)
}

func (s *service) CreatePort(ctx context.Context, req sdk.PortRequest) (sdk.Port, error) {
	if err := s.db.CreatePort(ctx, ovsdb.PortSpec{Name: req.Name, Type: req.Type, Options: req.Options, ExternalIDs: req.ExternalIDs, OFPort: req.OFPort, Owner: "podnet"}); err != nil {
		return sdk.Port{}, fmt.Errorf("%w: create port %q: %v", sdk.ErrSwitch, req.Name, err)
	}
	// Shorter than the agent's 15s so the port failure test stays quick.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.db.WaitOFPort(wctx, req.Name); err != nil {
		return sdk.Port{}, fmt.Errorf("%w: %v", sdk.ErrSwitch, err)
	}
	return s.Port(ctx, req.Name)
}

func (s *service) DeletePort(ctx context.Context, name string) error {
	if _, err := s.db.Port(ctx, name); errors.Is(err, ovsdb.ErrNoPort) {
		return nil
	}
	if err := s.db.DeletePort(ctx, name); err != nil {
		return fmt.Errorf("%w: delete port %q: %v", sdk.ErrSwitch, name, err)
	}
	return nil
}

func (s *service) Port(ctx context.Context, name string) (sdk.Port, error) {
	p, err := s.db.Port(ctx, name)
	if errors.Is(err, ovsdb.ErrNoPort) {
		return sdk.Port{}, fmt.Errorf("%w: port %q", sdk.ErrNotFound, name)
	}
	if err != nil {
		return sdk.Port{}, fmt.Errorf("%w: %v", sdk.ErrSwitch, err)
	}
	out := sdk.Port{Name: p.Name, Owner: p.Owner}
	if p.OFPort > 0 {
		out.OFPort = uint32(p.OFPort)
	}
	if mac, err := net.ParseMAC(p.MAC); err == nil {
		out.MAC = mac
	}
	return out, nil
}

func (s *service) PacketOut(context.Context, sdk.PacketOut) error {
	return fmt.Errorf("%w: packet-out is not wired in testagent", sdk.ErrInvalid)
}

func (s *service) NodeFacts(context.Context) (sdk.NodeFacts, error) { return sdk.NodeFacts{}, nil }

func (s *service) Synced(ctx context.Context) error {
	_, err := s.a.Synced(ctx, "podnet")
	return err
}

type portView struct{ db *ovsdb.Client }

func (v portView) OFPort(ctx context.Context, name string) (uint32, bool, error) {
	p, err := v.db.Port(ctx, name)
	if errors.Is(err, ovsdb.ErrNoPort) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if p.OFPort <= 0 {
		return 0, false, nil
	}
	return uint32(p.OFPort), true, nil
}

package cni

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// pod is a pod attached through libcni by this package, for the cases the
// cluster harness does not cover: ADDs expected to fail, and many ADDs and
// DELs in parallel.
type pod struct {
	name, netns, containerID string
	node                     *cluster.Node
	result                   *current.Result

	mu      sync.Mutex
	deleted bool
}

func (p *pod) IP() net.IP {
	for _, ip := range p.result.IPs {
		if ip.Address.IP.To4() != nil {
			return ip.Address.IP
		}
	}
	return p.result.IPs[0].Address.IP
}

func (p *pod) rt() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.containerID, NetNS: netns.Path(p.netns), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", p.name}}}
}

func cniOf(n *cluster.Node) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{n.CNIBinDir}, filepath.Join(n.Dir, "itest-cni-cache"), nil)
}

// addPod creates a netns and runs CNI ADD. On failure the netns is
// removed at once; on success DEL and netns removal run on cleanup unless
// del ran. Safe for concurrent use.
func addPod(t *testing.T, n *cluster.Node, name string) (*pod, error) {
	p := &pod{name: name, node: n, netns: testenv.Name("q" + name), containerID: fmt.Sprintf("%s-%s", testenv.RunID(), name)}
	if err := netns.Add(p.netns); err != nil {
		return nil, err
	}
	list, err := loadList(n)
	if err != nil {
		netns.Delete(p.netns)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cniOf(n).AddNetworkList(ctx, list, p.rt())
	if err != nil {
		netns.Delete(p.netns)
		return nil, fmt.Errorf("CNI ADD %s: %w", name, err)
	}
	if p.result, err = current.NewResultFromResult(res); err != nil {
		netns.Delete(p.netns)
		return nil, err
	}
	t.Cleanup(func() {
		if err := p.del(); err != nil {
			t.Logf("cleanup of pod %s: %v", name, err)
		}
	})
	return p, nil
}

// del runs CNI DEL and removes the netns; a second call does nothing.
func (p *pod) del() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return nil
	}
	p.deleted = true
	list, err := loadList(p.node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = cniOf(p.node).DelNetworkList(ctx, list, p.rt())
	if nerr := netns.Delete(p.netns); err == nil {
		err = nerr
	}
	return err
}

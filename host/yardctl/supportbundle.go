package yardctl

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
)

// defaultLogGlob is where kubelet keeps the containers' logs of the agent
// and OVS pods on a node.
const defaultLogGlob = "/var/log/pods/kube-system_switchyard-*/*/*.log"

func supportBundleCmd(o *options) *cobra.Command {
	var out, kubeconfig, logGlob string
	cmd := &cobra.Command{
		Use:   "supportbundle [-f FILE]",
		Short: "Collect what a bug report needs into one archive: the agent's plugins, tables, resources, every plugin's flows, metrics, readiness, logs, and (with --kubeconfig) every NodeAgent",
		Example: `  yardctl supportbundle -f /tmp/switchyard-node-1.tar.gz
  yardctl supportbundle --kubeconfig ~/.kube/config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				out = fmt.Sprintf("switchyard-supportbundle-%s.tar.gz", time.Now().UTC().Format("20060102T150405Z"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			files, problems, err := collect(ctx, o, kubeconfig, logGlob)
			if err != nil {
				return err
			}
			if err := writeBundle(out, files); err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d files)\n", out, len(files))
			for _, p := range problems {
				fmt.Fprintf(cmd.ErrOrStderr(), "not collected: %s\n", p)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "file", "f", "", "archive to write (default switchyard-supportbundle-<time>.tar.gz)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "also collect every NodeAgent and Traceflow through this cluster's apiserver")
	f.StringVar(&logGlob, "logs", defaultLogGlob, "glob of log files to include")
	return cmd
}

// collect gathers the bundle's files by name. Only an unreachable agent is
// an error: anything else missing is listed in problems (and in the
// bundle's README), so a half-broken node still yields a bundle.
func collect(ctx context.Context, o *options, kubeconfig, logGlob string) (map[string][]byte, []string, error) {
	c := o.client()
	files := map[string][]byte{}
	var problems []string
	var plugins []agent.PluginStatus
	if err := c.get(ctx, "/v1/plugins", &plugins); err != nil {
		return nil, nil, err
	}
	files["agent/plugins.json"], _ = json.MarshalIndent(plugins, "", "  ")
	for _, ep := range []struct{ path, file string }{
		{"/v1/tables", "agent/tables.json"},
		{"/v1/resources", "agent/resources.json"},
		{"/metrics", "agent/metrics.txt"},
		{"/readyz", "agent/readyz.txt"},
	} {
		b, code, err := c.do(ctx, "GET", ep.path, nil)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", ep.path, err))
			continue
		}
		if code/100 != 2 && ep.path != "/readyz" {
			problems = append(problems, fmt.Sprintf("%s: HTTP %d", ep.path, code))
		}
		files[ep.file] = b
	}
	for _, p := range plugins {
		var fs []string
		if err := c.get(ctx, "/v1/flows?plugin="+p.Name, &fs); err != nil {
			problems = append(problems, fmt.Sprintf("flows of %s: %v", p.Name, err))
			continue
		}
		files["flows/"+p.Name+".txt"] = []byte(strings.Join(fs, "\n") + "\n")
	}
	if logGlob != "" {
		matches, _ := filepath.Glob(logGlob)
		for _, m := range matches {
			b, err := readTail(m, 8<<20)
			if err != nil {
				problems = append(problems, fmt.Sprintf("log %s: %v", m, err))
				continue
			}
			files["logs/"+strings.ReplaceAll(strings.TrimPrefix(m, "/"), "/", "_")] = b
		}
	}
	if kubeconfig != "" {
		if err := collectCluster(ctx, kubeconfig, files); err != nil {
			problems = append(problems, "cluster objects: "+err.Error())
		}
	}
	readme := fmt.Sprintf("switchyard support bundle\ncollected: %s\nagent socket: %s\n", time.Now().UTC().Format(time.RFC3339), o.socket)
	if len(problems) > 0 {
		readme += "not collected:\n  " + strings.Join(problems, "\n  ") + "\n"
	}
	files["README.txt"] = []byte(readme)
	return files, problems, nil
}

func collectCluster(ctx context.Context, kubeconfig string, files map[string][]byte) error {
	c, err := clusterClient(kubeconfig)
	if err != nil {
		return err
	}
	for _, r := range []struct {
		file string
		res  dynamic.NamespaceableResourceInterface
	}{
		{"cluster/nodeagents.json", c.dyn.Resource(crdv1.NodeAgentsResource)},
		{"cluster/traceflows.json", c.dyn.Resource(crdv1.TraceflowsResource)},
		{"cluster/controllerinfos.json", c.dyn.Resource(crdv1.ControllerInfosResource)},
	} {
		l, err := r.res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", r.file, err)
		}
		files[r.file], _ = json.MarshalIndent(l.Items, "", "  ")
	}
	return nil
}

// readTail reads at most the last max bytes of a file: logs can be large.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		if _, err := f.Seek(-max, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(f)
}

func writeBundle(path string, files map[string][]byte) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Now()
	for _, n := range names {
		b := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: "switchyard/" + n, Mode: 0o644, Size: int64(len(b)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

package conflist

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"switchyard.dev/switchyard/cni/netconf"
)

// Defaults of the standard CNI layout.
const (
	DefaultConfDir    = "/etc/cni/net.d"
	DefaultBinDir     = "/opt/cni/bin"
	DefaultFileName   = "10-switchyard.conflist"
	DefaultBinaryName = "switchyard-cni"
	DefaultNetwork    = "switchyard"
	DefaultCNIVersion = "1.1.0"
)

// Options describe the conflist. Zero values take the defaults above.
type Options struct {
	ConfDir    string
	FileName   string
	BinDir     string
	BinaryName string
	Network    string
	CNIVersion string
	// Socket is the agent's CNI socket; empty keeps the binary's default.
	Socket string
	// MTU of pod interfaces; 0 lets the agent decide.
	MTU int
	// PortMap and Bandwidth chain the standard plugins after switchyard so
	// hostPort and the bandwidth annotations keep working. Their binaries
	// must be in BinDir too.
	PortMap   bool
	Bandwidth bool
}

func (o *Options) defaults() {
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&o.ConfDir, DefaultConfDir)
	set(&o.FileName, DefaultFileName)
	set(&o.BinDir, DefaultBinDir)
	set(&o.BinaryName, DefaultBinaryName)
	set(&o.Network, DefaultNetwork)
	set(&o.CNIVersion, DefaultCNIVersion)
}

// Render returns the conflist JSON for o, validated by the same parser the
// binary uses, so the agent can never write a config the binary rejects.
func Render(o Options) ([]byte, error) {
	o.defaults()
	self := map[string]any{"type": o.BinaryName}
	if o.Socket != "" {
		self["socket"] = o.Socket
	}
	if o.MTU != 0 {
		self["mtu"] = o.MTU
	}
	plugins := []any{self}
	if o.PortMap {
		plugins = append(plugins, map[string]any{
			"type": "portmap", "snat": true, "capabilities": map[string]bool{"portMappings": true},
		})
	}
	if o.Bandwidth {
		plugins = append(plugins, map[string]any{
			"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true},
		})
	}
	list := map[string]any{"cniVersion": o.CNIVersion, "name": o.Network, "plugins": plugins}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	// Validate exactly what the runtime will hand the binary: the list's
	// name and version injected into our plugin entry.
	self["cniVersion"], self["name"] = o.CNIVersion, o.Network
	entry, err := json.Marshal(self)
	if err != nil {
		return nil, err
	}
	if _, err := netconf.Parse(entry); err != nil {
		return nil, fmt.Errorf("conflist options: %w", err)
	}
	return append(data, '\n'), nil
}

// Install copies the binary at binSrc into the CNI bin directory and then
// writes the conflist, returning the conflist's path. With binSrc empty the
// binary must already be installed.
func Install(binSrc string, o Options) (string, error) {
	o.defaults()
	if binSrc != "" {
		if err := installBinary(binSrc, filepath.Join(o.BinDir, o.BinaryName)); err != nil {
			return "", err
		}
	}
	return Write(o)
}

// Write writes the conflist atomically. It fails if the binaries the list
// names are not installed and executable in BinDir.
func Write(o Options) (string, error) {
	o.defaults()
	need := []string{o.BinaryName}
	if o.PortMap {
		need = append(need, "portmap")
	}
	if o.Bandwidth {
		need = append(need, "bandwidth")
	}
	for _, b := range need {
		p := filepath.Join(o.BinDir, b)
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("not writing the conflist: CNI binary %s is not installed (%w); install it first so the runtime never sees a network it cannot run", p, err)
		}
		if fi.Mode()&0o111 == 0 || !fi.Mode().IsRegular() {
			return "", fmt.Errorf("not writing the conflist: %s is not an executable file", p)
		}
	}
	data, err := Render(o)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.ConfDir, 0o755); err != nil {
		return "", fmt.Errorf("creating CNI config dir: %w", err)
	}
	dst := filepath.Join(o.ConfDir, o.FileName)
	if err := atomicWrite(dst, 0o644, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return "", err
	}
	return dst, nil
}

func installBinary(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("installing CNI binary: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating CNI bin dir: %w", err)
	}
	// Rename over the old binary rather than writing into it: a runtime may
	// be executing it right now ("text file busy").
	return atomicWrite(dst, 0o755, func(w io.Writer) error { _, err := io.Copy(w, in); return err })
}

// atomicWrite writes dst via a temp file in the same directory, so readers
// see either the old or the new content, never a partial file.
func atomicWrite(dst string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = fill(tmp); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		err = errors.Join(d.Sync(), d.Close())
	}
	return err
}

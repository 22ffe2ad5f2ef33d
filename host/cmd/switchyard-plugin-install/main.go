// Command switchyard-plugin-install is the entrypoint of a plugin image's
// init container: it copies the plugin binary into the agent's plugin
// directory (a volume the agent container shares), atomically, so an agent
// that loads the plugin at that moment sees the old binary or the new one,
// never half of one.
//
//	switchyard-plugin-install /usr/local/lib/switchyard/plugins/template /plugins
//
// Every argument but the last is a file to install; the last is the
// directory. The image needs nothing else: no shell, no cp.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: switchyard-plugin-install FILE... DIR")
		os.Exit(2)
	}
	dir := os.Args[len(os.Args)-1]
	for _, src := range os.Args[1 : len(os.Args)-1] {
		dst := filepath.Join(dir, filepath.Base(src))
		if err := install(src, dst); err != nil {
			fmt.Fprintln(os.Stderr, "switchyard-plugin-install:", err)
			os.Exit(1)
		}
		fmt.Println("installed", dst)
	}
}

// install writes a temp file beside dst and renames it over dst: a plugin
// process running the old binary keeps it ("text file busy" never occurs).
func install(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err = tmp.Chmod(0o755); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// Command gen-config-reference writes manifests/docs/config-reference.md
// from the config types themselves (`make generate`; `make verify` checks
// it is current): every key of the agent config (host/config.Config, its
// defaults read from setDefaults) and of each in-tree plugin's config
// section (the Config struct of its feature package, defaults from the
// package's Default<Field> constants or the field comment's "(default X)").
// It reads the source with go/ast, so the reference says what the code
// says, comments included.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	repo := flag.String("repo", ".", "root of the source tree")
	out := flag.String("o", "manifests/docs/config-reference.md", "output file")
	flag.Parse()
	doc, err := generate(*repo)
	if err == nil {
		err = os.WriteFile(*out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-config-reference:", err)
		os.Exit(1)
	}
}

// plugins are the in-tree plugins with a config section: name, the
// directory of the package declaring Config.
var plugins = []struct{ name, dir, desc string }{
	{"podnet", "plugins/podnet/feature", "pod interfaces, IPAM, same-node forwarding"},
	{"tunnel", "plugins/tunnel/feature", "Geneve or VXLAN between nodes, masquerade to the outside"},
	{"service", "plugins/service/feature", "ClusterIP, NodePort and load-balancer Services in br-int"},
	{"netpol", "plugins/netpol/feature", "NetworkPolicy and native policy enforcement"},
	{"egress", "plugins/egress/feature", "Egress IPs and bandwidth"},
	{"template", "plugins/template", "the example third-party plugin (its own module)"},
}

// row is one documented key.
type row struct{ key, typ, def, doc string }

// pkg is a parsed package: its struct types and string/int constants.
type pkg struct {
	types  map[string]*ast.TypeSpec
	docs   map[string]string // type name -> doc of the type spec
	consts map[string]string
	files  []*ast.File
}

func load(dir string) (*pkg, error) {
	fset := token.NewFileSet()
	//lint:ignore SA1019 the config package has no build tags; x/tools/go/packages would be a dependency for nothing
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	p := &pkg{types: map[string]*ast.TypeSpec{}, docs: map[string]string{}, consts: map[string]string{}}
	var names []string
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var files []string
		for f := range pkgs[n].Files {
			files = append(files, f)
		}
		sort.Strings(files)
		for _, fn := range files {
			f := pkgs[n].Files[fn]
			p.files = append(p.files, f)
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, s := range g.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.types[s.Name.Name] = s
						p.docs[s.Name.Name] = text(g.Doc)
					case *ast.ValueSpec:
						if g.Tok != token.CONST {
							continue
						}
						for i, id := range s.Names {
							if i < len(s.Values) {
								if lit, ok := s.Values[i].(*ast.BasicLit); ok {
									p.consts[id.Name] = unquote(lit.Value)
								}
							}
						}
					}
				}
			}
		}
	}
	return p, nil
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// text flattens a comment group into one paragraph.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeString(e.X)
	case *ast.ArrayType:
		return "[]" + typeString(e.Elt)
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.MapType:
		return "map[" + typeString(e.Key) + "]" + typeString(e.Value)
	}
	return fmt.Sprintf("%T", e)
}

// friendly names the YAML type an operator writes.
func friendly(t string) string {
	switch t {
	case "time.Duration":
		return "duration"
	case "json.RawMessage":
		return "object"
	case "netip.Prefix":
		return "CIDR"
	case "[]netip.Prefix":
		return "[]CIDR"
	case "float64":
		return "number"
	case "uint16", "int":
		return "integer"
	case "[]uint16":
		return "[]integer"
	}
	return t
}

func tagKey(f *ast.Field, tag string) string {
	if f.Tag == nil {
		return ""
	}
	m := regexp.MustCompile(tag + `:"([^",]*)`).FindStringSubmatch(unquote(f.Tag.Value))
	if m == nil {
		return ""
	}
	return m[1]
}

// fields walks a struct, descending into the package's own struct types.
func fields(p *pkg, typeName, prefix, tag string, def func(field, key string) string) []row {
	return fieldsIn(p, typeName, prefix, tag, "", def)
}

// fieldsIn documents a field without a comment of its own by its struct
// type's comment (parentDoc), e.g. node.mtu by the Node type's.
func fieldsIn(p *pkg, typeName, prefix, tag, parentDoc string, def func(field, key string) string) []row {
	ts, ok := p.types[typeName]
	if !ok {
		return nil
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return nil
	}
	var out []row
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 || !f.Names[0].IsExported() {
			continue
		}
		key := tagKey(f, tag)
		if key == "" || key == "-" {
			continue
		}
		full := prefix + key
		t := typeString(f.Type)
		doc := text(f.Doc)
		if doc == "" {
			doc = text(f.Comment)
		}
		if nested, ok := p.types[strings.TrimPrefix(t, "[]")]; ok {
			if _, isStruct := nested.Type.(*ast.StructType); isStruct {
				if !strings.HasPrefix(t, "[]") {
					out = append(out, fieldsIn(p, t, full+".", tag, p.docs[t], def)...)
				}
				// A list of structs (plugins) gets a table of its own.
				continue
			}
		}
		if doc == "" && parentDoc != "" {
			doc = "(" + parentDoc + ")"
		}
		out = append(out, row{key: full, typ: friendly(t), def: def(f.Names[0].Name, full), doc: doc})
	}
	return out
}

// hostDefaults reads the v.SetDefault("key", value) calls of setDefaults.
func hostDefaults(p *pkg) map[string]string {
	out := map[string]string{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "setDefaults" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "SetDefault" {
					return true
				}
				k, ok := call.Args[0].(*ast.BasicLit)
				if !ok {
					return true
				}
				switch v := call.Args[1].(type) {
				case *ast.BasicLit:
					out[unquote(k.Value)] = unquote(v.Value)
				case *ast.Ident:
					out[unquote(k.Value)] = p.consts[v.Name]
				}
				return true
			})
		}
	}
	return out
}

var defaultInDoc = regexp.MustCompile(`\(default:? ([^;)]+)`)

// pluginDefault finds a field's default: a Default<Field> constant (or the
// singular of a list field's name), else "(default X)" in its comment.
func pluginDefault(p *pkg, field, doc string) string {
	for _, name := range []string{"Default" + field, "Default" + strings.TrimSuffix(field, "s")} {
		if v, ok := p.consts[name]; ok {
			return v
		}
	}
	if m := defaultInDoc.FindStringSubmatch(doc); m != nil {
		return strings.TrimSpace(m[1])
	}
	return ""
}

func table(b *bytes.Buffer, rows []row) {
	b.WriteString("| key | type | default | meaning |\n|---|---|---|---|\n")
	for _, r := range rows {
		def := "—"
		if r.def != "" {
			def = "`" + r.def + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", r.key, r.typ, def, strings.ReplaceAll(r.doc, "|", `\|`))
	}
}

func generate(repo string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated by manifests/cmd/gen-config-reference (make generate) from the
config types; do not edit. make verify fails when it is stale. -->

The agent reads one YAML file (` + "`--config`" + `; in a cluster the ConfigMap
` + "`switchyard-agent-config`" + `, key ` + "`agent.yaml`" + `, in ` + "`manifests/agent.yaml`" + `).
Every key can also be set as an environment variable ` + "`SWITCHYARD_<KEY>`" + ` with
dots as underscores (e.g. ` + "`SWITCHYARD_BRIDGE_NAME`" + `); a few have flags
(` + "`switchyard-agent --help`" + `). The ` + "`switchyard-ovs`" + ` DaemonSet reads the same
file for ` + "`bridge.name`" + `, ` + "`bridge.datapathType`" + ` and ` + "`ovs.runDir`" + `. Its own flag
` + "`--malloc`" + ` picks ovs-vswitchd's allocator: ` + "`jemalloc`" + ` (the default; the image
ships Debian's libjemalloc2, the entrypoint preloads it and refuses to start
without it) or ` + "`system`" + ` (glibc's malloc). On the userspace datapath the switch
allocates two heap blocks per received packet; with glibc's malloc they grew
slower as the flow tables grew (10,000 Services), with jemalloc they do not.

## Agent (` + "`host/config`" + `)

`)
	hp, err := load(filepath.Join(repo, "host/config"))
	if err != nil {
		return nil, err
	}
	hd := hostDefaults(hp)
	rows := fields(hp, "Config", "", "mapstructure", func(_, key string) string { return hd[key] })
	table(&b, rows)
	b.WriteString("\n### `plugins[]`: one entry per plugin to run\n\n")
	prow := fields(hp, "Plugin", "plugins[].", "mapstructure", func(string, string) string { return "" })
	prow = append(prow, row{key: "plugins[].config", typ: "object", doc: "The plugin's own section, handed to it as JSON with key case kept (see below)."})
	table(&b, prow)
	b.WriteString("\n## Plugins\n\nEach plugin's `config:` section. Keys left out take the default.\n")
	for _, pl := range plugins {
		p, err := load(filepath.Join(repo, pl.dir))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pl.name, err)
		}
		if _, ok := p.types["Config"]; !ok {
			return nil, fmt.Errorf("%s: no Config type in %s", pl.name, pl.dir)
		}
		fmt.Fprintf(&b, "\n### `%s`: %s (`%s`)\n\n", pl.name, pl.desc, pl.dir)
		var prs []row
		for _, r := range fields(p, "Config", "", "json", func(field, _ string) string { return "\x00" + field }) {
			r.def = pluginDefault(p, strings.TrimPrefix(r.def, "\x00"), r.doc)
			prs = append(prs, r)
		}
		if len(prs) == 0 {
			b.WriteString("No keys.\n")
			continue
		}
		table(&b, prs)
	}
	return b.Bytes(), nil
}

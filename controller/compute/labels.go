package compute

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// interner maps strings to dense uint32 IDs so labels and selectors compare as
// integers and each distinct key or value is stored once. ID 0 is reserved.
type interner struct {
	ids  map[string]uint32
	strs []string
}

func newInterner() interner {
	return interner{ids: map[string]uint32{}, strs: []string{""}}
}

func (in *interner) id(s string) uint32 {
	if id, ok := in.ids[s]; ok {
		return id
	}
	id := uint32(len(in.strs))
	in.strs = append(in.strs, s)
	in.ids[s] = id
	return id
}

// label is one key=value pair of a pod or namespace. kv identifies the pair
// itself and is what the indexes are keyed by.
type label struct {
	key, val, kv uint32
}

// labelSet is sorted by key.
type labelSet []label

func (ls labelSet) get(key uint32) (uint32, bool) {
	i, ok := slices.BinarySearchFunc(ls, key, func(l label, k uint32) int { return int(l.key) - int(k) })
	if !ok {
		return 0, false
	}
	return ls[i].val, true
}

func (ls labelSet) equal(o labelSet) bool {
	return slices.EqualFunc(ls, o, func(a, b label) bool { return a.kv == b.kv })
}

// internLabels converts a label map into a labelSet.
func (e *Engine) internLabels(m map[string]string) labelSet {
	if len(m) == 0 {
		return nil
	}
	ls := make(labelSet, 0, len(m))
	for k, v := range m {
		kid, vid := e.strs.id(k), e.strs.id(v)
		ls = append(ls, label{key: kid, val: vid, kv: e.kvID(kid, vid)})
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].key < ls[j].key })
	return ls
}

func (e *Engine) kvID(k, v uint32) uint32 {
	key := uint64(k)<<32 | uint64(v)
	if id, ok := e.kvs[key]; ok {
		return id
	}
	id := uint32(len(e.kvs) + 1)
	e.kvs[key] = id
	return id
}

type reqOp uint8

const (
	opIn reqOp = iota
	opNotIn
	opExists
	opNotExists
)

type req struct {
	op   reqOp
	key  uint32
	vals []uint32
}

// selector is a compiled label selector: every requirement must hold. The
// zero selector matches everything.
type selector struct {
	reqs []req
}

func (s *selector) matches(ls labelSet) bool {
	for i := range s.reqs {
		r := &s.reqs[i]
		v, has := ls.get(r.key)
		switch r.op {
		case opIn:
			if !has || !slices.Contains(r.vals, v) {
				return false
			}
		case opNotIn:
			if has && slices.Contains(r.vals, v) {
				return false
			}
		case opExists:
			if !has {
				return false
			}
		case opNotExists:
			if has {
				return false
			}
		}
	}
	return true
}

// indexKV returns the kv ID of an equality requirement, which every matching
// object must carry, or 0 when the selector has none.
func (e *Engine) indexKV(s *selector) uint32 {
	for _, r := range s.reqs {
		if r.op == opIn && len(r.vals) == 1 {
			return e.kvID(r.key, r.vals[0])
		}
	}
	return 0
}

// compileSelector compiles a metav1.LabelSelector and returns its canonical
// text, which is identical for selectors that mean the same thing however
// they were written (matchLabels or a single-value In, any order). A nil
// selector compiles like an empty one; callers decide what nil means.
func (e *Engine) compileSelector(ls *metav1.LabelSelector) (selector, string, error) {
	if ls == nil {
		return selector{}, "", nil
	}
	type textReq struct {
		key  string
		op   reqOp
		vals []string
	}
	var trs []textReq
	for k, v := range ls.MatchLabels {
		trs = append(trs, textReq{k, opIn, []string{v}})
	}
	for _, x := range ls.MatchExpressions {
		var op reqOp
		switch x.Operator {
		case metav1.LabelSelectorOpIn:
			op = opIn
		case metav1.LabelSelectorOpNotIn:
			op = opNotIn
		case metav1.LabelSelectorOpExists:
			op = opExists
		case metav1.LabelSelectorOpDoesNotExist:
			op = opNotExists
		default:
			return selector{}, "", fmt.Errorf("label selector key %q: unknown operator %q: use In, NotIn, Exists or DoesNotExist", x.Key, x.Operator)
		}
		if (op == opIn || op == opNotIn) && len(x.Values) == 0 {
			return selector{}, "", fmt.Errorf("label selector key %q: operator %s needs at least one value", x.Key, x.Operator)
		}
		if (op == opExists || op == opNotExists) && len(x.Values) != 0 {
			return selector{}, "", fmt.Errorf("label selector key %q: operator %s takes no values", x.Key, x.Operator)
		}
		vals := slices.Clone(x.Values)
		slices.Sort(vals)
		vals = slices.Compact(vals)
		trs = append(trs, textReq{x.Key, op, vals})
	}
	sort.Slice(trs, func(i, j int) bool {
		if trs[i].key != trs[j].key {
			return trs[i].key < trs[j].key
		}
		if trs[i].op != trs[j].op {
			return trs[i].op < trs[j].op
		}
		return strings.Join(trs[i].vals, ",") < strings.Join(trs[j].vals, ",")
	})
	var b strings.Builder
	sel := selector{reqs: make([]req, 0, len(trs))}
	for i, tr := range trs {
		if i > 0 && tr.key == trs[i-1].key && tr.op == trs[i-1].op && slices.Equal(tr.vals, trs[i-1].vals) {
			continue
		}
		r := req{op: tr.op, key: e.strs.id(tr.key)}
		for _, v := range tr.vals {
			r.vals = append(r.vals, e.strs.id(v))
		}
		sel.reqs = append(sel.reqs, r)
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(tr.key)
		b.WriteString([...]string{" in ", " notin ", " exists", " !exists"}[tr.op])
		if len(tr.vals) > 0 {
			b.WriteByte('(')
			b.WriteString(strings.Join(tr.vals, "|"))
			b.WriteByte(')')
		}
	}
	return sel, b.String(), nil
}

package flowstore

import "switchyard.dev/switchyard/host/pipeline"

// AllTables makes Tagged look in every table.
const AllTables = -1

// Tagged returns owner's flows whose cookie tag matches tag in the bits
// of mask, in table (AllTables: any): what a delete-by-tag removes. The
// order is unspecified. It reads only the key and cookie of each held flow
// and rebuilds the Entry of the matches alone.
func (s *Store) Tagged(owner string, table int, tag, mask uint32) []*Entry {
	o := s.owners[owner]
	if o == nil {
		return nil
	}
	var out []*Entry
	for k, h := range s.byKey {
		if h.owner != o || (table != AllTables && int(k.Table) != table) {
			continue
		}
		if _, _, t := pipeline.SplitCookie(h.cookie); t&mask == tag&mask {
			out = append(out, entry(k, h))
		}
	}
	return out
}

// Lookup returns the entry installed under k.
func (s *Store) Lookup(k pipeline.Key) (*Entry, bool) {
	h, ok := s.byKey[k]
	if !ok {
		return nil, false
	}
	return entry(k, h), true
}

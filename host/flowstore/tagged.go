package flowstore

import "switchyard.dev/switchyard/host/pipeline"

// AllTables makes Tagged look in every table.
const AllTables = -1

// Tagged returns owner's flows whose cookie tag matches tag in the bits
// of mask, in table (AllTables: any): what a delete-by-tag removes. The
// order is unspecified.
func (s *Store) Tagged(owner string, table int, tag, mask uint32) []*Entry {
	o := s.owners[owner]
	if o == nil {
		return nil
	}
	var out []*Entry
	for k, e := range o.flows {
		if table != AllTables && int(k.Table) != table {
			continue
		}
		if _, _, t := pipeline.SplitCookie(e.R.Cookie); t&mask == tag&mask {
			out = append(out, e)
		}
	}
	return out
}

// Lookup returns the entry installed under k.
func (s *Store) Lookup(k pipeline.Key) (*Entry, bool) {
	e, ok := s.byKey[k]
	return e, ok
}

package flow

import "fmt"

// OpKind is what a batch operation does.
type OpKind uint8

const (
	// OpAdd installs an object, replacing one with the same key owned by the
	// same plugin.
	OpAdd OpKind = iota + 1
	// OpModify changes an existing object's actions (or buckets/bands).
	OpModify
	// OpDelete removes an object by key (flows: table, priority, match).
	OpDelete
	// OpDeleteTagged removes every flow of the plugin whose Tag matches
	// Op.Flow.Tag in the bits of Op.TagMask, in Op.Flow.Table or, when that
	// is empty, in every table. See Batch.DeleteTagged.
	OpDeleteTagged
)

func (k OpKind) String() string {
	switch k {
	case OpAdd:
		return "add"
	case OpModify:
		return "modify"
	case OpDelete:
		return "delete"
	case OpDeleteTagged:
		return "delete-tagged"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one operation of a Batch: exactly one of Flow, Group, Meter is set.
type Op struct {
	Kind  OpKind
	Flow  *Flow
	Group *Group
	Meter *Meter
	// TagMask is the mask of an OpDeleteTagged.
	TagMask uint32
}

func (o Op) String() string {
	switch {
	case o.Kind == OpDeleteTagged && o.Flow != nil:
		table := o.Flow.Table
		if table == "" {
			table = "*"
		}
		return fmt.Sprintf("delete-tagged table=%s, tag=%#x/%#x", table, o.Flow.Tag, o.TagMask)
	case o.Flow != nil:
		return o.Kind.String() + " " + o.Flow.String()
	case o.Group != nil:
		return o.Kind.String() + " " + o.Group.String()
	case o.Meter != nil:
		return o.Kind.String() + " " + o.Meter.String()
	}
	return o.Kind.String() + " <empty>"
}

// Batch is a list of operations the host applies atomically: either all of
// them reach the switch (in one OpenFlow bundle) or none do. Flow operations
// keep their order (a later operation on the same key wins); meters and
// groups are added before the flows and deleted after them, so a flow can
// use a group added in the same batch.
type Batch struct {
	Ops []Op
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{} }

func (b *Batch) add(k OpKind, f *Flow, g *Group, m *Meter) *Batch {
	b.Ops = append(b.Ops, Op{Kind: k, Flow: f, Group: g, Meter: m})
	return b
}

// AddFlows appends flow additions.
func (b *Batch) AddFlows(fs ...Flow) *Batch {
	for i := range fs {
		f := fs[i]
		b.add(OpAdd, &f, nil, nil)
	}
	return b
}

// ModifyFlows appends flow modifications.
func (b *Batch) ModifyFlows(fs ...Flow) *Batch {
	for i := range fs {
		f := fs[i]
		b.add(OpModify, &f, nil, nil)
	}
	return b
}

// DeleteFlows appends flow deletions (only Table, Priority and Match matter).
func (b *Batch) DeleteFlows(fs ...Flow) *Batch {
	for i := range fs {
		f := fs[i]
		b.add(OpDelete, &f, nil, nil)
	}
	return b
}

// DeleteTagged appends the deletion of every flow of the plugin whose Tag
// matches tag in the bits set in mask, in table (empty: in every table),
// without naming them one by one: the switch and the host's flow store
// both drop them, atomically with the rest of the batch. A plugin that
// tags a pod's or a rule's flows with its ID removes them all this way.
// A mask of 0 matches every tag. Flows the switch learned from the
// plugin's ActLearn carry the learner's tag but are not the plugin's
// submissions: they are not deleted here, and go when they time out or
// with the plugin.
func (b *Batch) DeleteTagged(table string, tag, mask uint32) *Batch {
	b.Ops = append(b.Ops, Op{Kind: OpDeleteTagged, Flow: &Flow{Table: table, Tag: tag & mask}, TagMask: mask})
	return b
}

func (b *Batch) AddGroup(g Group) *Batch    { return b.add(OpAdd, nil, &g, nil) }
func (b *Batch) ModifyGroup(g Group) *Batch { return b.add(OpModify, nil, &g, nil) }
func (b *Batch) DeleteGroup(id uint32) *Batch {
	return b.add(OpDelete, nil, &Group{ID: id}, nil)
}
func (b *Batch) AddMeter(m Meter) *Batch    { return b.add(OpAdd, nil, nil, &m) }
func (b *Batch) ModifyMeter(m Meter) *Batch { return b.add(OpModify, nil, nil, &m) }
func (b *Batch) DeleteMeter(id uint32) *Batch {
	return b.add(OpDelete, nil, nil, &Meter{ID: id})
}

// Len is the number of operations.
func (b *Batch) Len() int { return len(b.Ops) }

// Validate checks the shape of every operation.
func (b *Batch) Validate() error {
	for i, o := range b.Ops {
		n := 0
		if o.Flow != nil {
			n++
		}
		if o.Group != nil {
			n++
		}
		if o.Meter != nil {
			n++
		}
		if n != 1 {
			return fmt.Errorf("batch op %d: exactly one of flow, group, meter must be set (got %d)", i, n)
		}
		if o.Kind < OpAdd || o.Kind > OpDeleteTagged {
			return fmt.Errorf("batch op %d: unknown kind %d", i, o.Kind)
		}
		if o.Kind == OpDeleteTagged {
			if o.Flow == nil {
				return fmt.Errorf("batch op %d: delete-tagged applies to flows only", i)
			}
			continue
		}
		if o.Kind == OpDelete {
			if o.Flow != nil && o.Flow.Table == "" {
				return fmt.Errorf("batch op %d: delete without a table", i)
			}
			continue
		}
		var err error
		switch {
		case o.Flow != nil:
			err = o.Flow.Validate()
		case o.Group != nil:
			err = o.Group.Validate()
		case o.Meter != nil:
			err = o.Meter.Validate()
		}
		if err != nil {
			return fmt.Errorf("batch op %d: %w", i, err)
		}
	}
	return nil
}

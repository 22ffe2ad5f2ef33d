package kit

import "testing"

func TestFlowTable(t *testing.T) {
	for _, tc := range []struct {
		text string
		want uint8
	}{
		{"cookie=0x1000100000000, priority=50,arp actions=set_field:0x1/0xf->reg0,goto_table:10", 0},
		{"cookie=0x1000100000000, table=30, priority=100,ip actions=ct(table=31,zone=1)", 30},
		{"table=7, priority=1 actions=drop", 7},
		{"cookie=0x1, priority=1 actions=ct(table=31,zone=1)", 0},
		{"cookie=0x1, priority=1 actions=resubmit(,12)", 0},
	} {
		if got := flowTable(tc.text); got != tc.want {
			t.Errorf("flowTable(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

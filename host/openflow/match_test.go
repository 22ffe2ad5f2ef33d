package openflow

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		m       Match
		wantErr string // substring; "" means valid
	}{
		{"ok", Match{ipv4, tcp, Exact(FieldTCPDst, 80)}, ""},
		{"ipv6 proto ok", Match{ipv6, tcp, Exact(FieldTCPDst, 80)}, ""},
		{"no eth_type", Match{Addr(FieldIPv4Src, ip("10.0.0.1"))}, "ip_src needs eth_type=0x0800"},
		{"wrong eth_type", Match{ipv6, Addr(FieldIPv4Src, ip("10.0.0.1"))}, "ip_src needs eth_type=0x0800"},
		{"no proto", Match{ipv4, Exact(FieldTCPDst, 80)}, "tcp_dst needs nw_proto=6"},
		{"masked unmaskable", Match{Masked(FieldInPort, 1, 0xff)}, "in_port cannot be masked"},
		{"duplicate", Match{ipv4, ipv4}, "eth_type appears twice"},
		{"ct tuple without trk", Match{ipv4, Addr(FieldCTNwSrc, ip("10.0.0.1"))}, "ct_nw_src needs ct_state=-inv+trk"},
		{"unknown field", Match{{Field: numFields}}, "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: got %v, want ErrBadValue mentioning %q", err, tc.wantErr)
			}
			// The encoder refuses the same match.
			if _, err := Marshal(1, &FlowMod{Flow: Flow{Match: tc.m}}); !errors.Is(err, ErrBadValue) {
				t.Fatalf("Marshal: got %v, want ErrBadValue", err)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	got := Match{Exact(FieldTCPDst, 80), tcp, Uint128(FieldXXReg0, 0, 0x500000007, 0, 0xffffffff000000ff), ipv4}.Normalize()
	want := Match{Exact(FieldReg2, 5), Masked(FieldReg3, 7, 0xff), ipv4, tcp, Exact(FieldTCPDst, 80)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Normalize (-want +got):\n%s", diff)
	}
}

func TestSwitchErrorNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code ErrorCode
		want string
	}{
		{ErrCodeBadOutPort, "OFPBAC_BAD_OUT_PORT"},
		{ErrorCode{5, 3}, "OFPFMFC_OVERLAP"},
		{ErrorCode{17, 13}, "OFPBFC_MSG_FAILED"},
		{ErrorCode{5, 200}, "OFPET_FLOW_MOD_FAILED code 200"},
		{ErrorCode{0xffff, 3}, "OFPET_EXPERIMENTER code 3"},
	}
	for _, tc := range tests {
		if got := tc.code.String(); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.code, got, tc.want)
		}
	}
	err := error(&SwitchError{Code: ErrCodeOverlap, Xid: 9, Index: -1})
	if !errors.Is(err, ErrCodeOverlap) || errors.Is(err, ErrCodeBadOutPort) {
		t.Errorf("errors.Is on SwitchError does not match by code: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	good := mustMarshal(1, &FlowMod{Flow: goldenFlowForMsgs})
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShortMessage},
		{"short header", good[:4], ErrShortMessage},
		{"truncated body", good[:len(good)-8], ErrShortMessage},
		{"bad version", append([]byte{4}, good[1:]...), ErrBadVersion},
		{"length below header", []byte{6, 0, 0, 4, 0, 0, 0, 0}, ErrBadLength},
	}
	for _, tc := range tests {
		_, _, _, err := DecodeMessage(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// A truncated flow mod whose header length is fixed up fails inside the body.
	cut := append([]byte(nil), good[:60]...)
	setLen16(cut, 2, len(cut))
	var de *DecodeError
	if _, _, _, err := DecodeMessage(cut); !errors.As(err, &de) || !strings.Contains(de.What, "FLOW_MOD") {
		t.Errorf("truncated flow mod body: got %v, want DecodeError naming FLOW_MOD", err)
	}
}

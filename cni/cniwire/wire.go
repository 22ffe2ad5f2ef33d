package cniwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
)

// The operations, as CNI names them.
const (
	OpAdd    = "ADD"
	OpDel    = "DEL"
	OpCheck  = "CHECK"
	OpStatus = "STATUS"
	OpGC     = "GC"
)

// MaxMessage bounds one request or response: a network config and a few
// thousand GC attachments fit many times over.
const MaxMessage = 4 << 20

// Request is one CNI call. ADD, DEL and CHECK fill the attachment fields,
// GC ValidAttachments; every call carries the network config.
type Request struct {
	Op          string `json:"op"`
	ContainerID string `json:"containerID,omitempty"`
	Netns       string `json:"netns,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	CNIVersion  string `json:"cniVersion,omitempty"`
	NetworkName string `json:"networkName,omitempty"`
	Pod         PodRef `json:"pod"`
	// RawArgs is CNI_ARGS as the runtime set it.
	RawArgs string `json:"rawArgs,omitempty"`
	// NetConf is the network config exactly as the runtime passed it.
	NetConf          []byte       `json:"netConf,omitempty"`
	ValidAttachments []Attachment `json:"validAttachments,omitempty"`
}

// PodRef names the pod from CNI_ARGS.
type PodRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	UID       string `json:"uid,omitempty"`
}

// Attachment is one live attachment in a GC.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// Response answers a Request: an Error, or for ADD a Result.
type Response struct {
	Error  *Error  `json:"error,omitempty"`
	Result *Result `json:"result,omitempty"`
}

// Error is a CNI error: code, message and details as the spec has them.
type Error struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details,omitempty"`
}

// Result is an ADD's result at the newest spec version; the binary
// converts it to the version the runtime asked for.
type Result struct {
	Interfaces []Interface `json:"interfaces,omitempty"`
	IPs        []IPConfig  `json:"ips,omitempty"`
	Routes     []Route     `json:"routes,omitempty"`
	DNS        *DNS        `json:"dns,omitempty"`
}

// Interface is one interface of the result.
type Interface struct {
	Name    string `json:"name"`
	MAC     string `json:"mac,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
	MTU     uint32 `json:"mtu,omitempty"`
}

// IPConfig is one address; Interface indexes Result.Interfaces.
type IPConfig struct {
	Interface *int32 `json:"interface,omitempty"`
	Address   string `json:"address"`
	Gateway   string `json:"gateway,omitempty"`
}

// Route is one route for the pod.
type Route struct {
	Dst string `json:"dst"`
	GW  string `json:"gw,omitempty"`
}

// DNS is the result's DNS section.
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// ErrNoAnswer: the agent closed the connection without answering (it
// stopped or crashed during the call).
var ErrNoAnswer = errors.New("the agent closed the connection without answering")

// Call sends req to the agent listening on socket and returns its answer.
// ctx bounds the whole call: when it ends, the connection is closed, and
// the agent stops working on the request.
func Call(ctx context.Context, socket string, req *Request) (*Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, callError(ctx, fmt.Errorf("sending the request: %w", err))
	}
	var resp Response
	if err := json.NewDecoder(io.LimitReader(conn, MaxMessage)).Decode(&resp); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = ErrNoAnswer
		}
		return nil, callError(ctx, err)
	}
	return &resp, nil
}

// callError prefers the context's reason: a call cut off by its deadline
// fails on the closed connection, which would hide why.
func callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ReadRequest decodes one request from the connection of a caller: at
// most MaxMessage bytes, with a known Op. Fields it does not know are
// ignored, so a newer binary still reaches an older agent.
func ReadRequest(r io.Reader) (*Request, error) {
	dec := json.NewDecoder(io.LimitReader(r, MaxMessage))
	var req Request
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("reading a CNI request: %w", err)
	}
	switch req.Op {
	case OpAdd, OpDel, OpCheck, OpStatus, OpGC:
	default:
		return nil, fmt.Errorf("unknown CNI operation %q (want ADD, DEL, CHECK, STATUS or GC)", req.Op)
	}
	return &req, nil
}

// WriteResponse encodes resp for the caller.
func WriteResponse(w io.Writer, resp *Response) error {
	return json.NewEncoder(w).Encode(resp)
}
